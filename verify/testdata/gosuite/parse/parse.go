// Package parse splits paths; its tests name subtests with "/" and
// spaces, as real suites do.
package parse

import "strings"

// Split splits a slash-separated path.
func Split(p string) []string { return strings.Split(p, "/") }
