// Package term tells whether the CLI talks to a person at a terminal: for
// the live view of a run, and for a review that prompts.
package term

import (
	"io"
	"os"
)

// Reader is implemented by a stdin that stands for a terminal although it
// is not a character device; tests use it to drive an interactive review.
type Reader interface {
	IsTerminal() bool
}

// IsTerminal reports whether w is a terminal: a character device other
// than the null device, with a TERM other than dumb.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isCharDevice(f) && os.Getenv("TERM") != "dumb"
}

// IsInteractive reports whether the CLI can prompt: in and out are both
// terminals. A dumb one counts: TERM=dumb says how to draw, not that
// nobody types.
func IsInteractive(in io.Reader, out io.Writer) bool {
	if t, ok := in.(Reader); ok {
		return t.IsTerminal()
	}
	fin, ok := in.(*os.File)
	fout, isFile := out.(*os.File)
	return ok && isCharDevice(fin) && isFile && isCharDevice(fout)
}

// isCharDevice reports whether f is a character device other than the null
// device (which is one, but nobody types into it).
func isCharDevice(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
