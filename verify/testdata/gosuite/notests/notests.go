// Package notests has no tests.
package notests

// Answer is 42.
const Answer = 42
