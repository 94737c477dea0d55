// Package textkit holds small text helpers.
package textkit
