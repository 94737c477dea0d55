//go:build linux || darwin

package term

import (
	"testing"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

// TERM=dumb draws plain lines, and still lets a person answer a prompt.
func TestDumbTerminalIsInteractive(t *testing.T) {
	t.Setenv("TERM", "dumb")
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	require.False(t, IsTerminal(tty), "no live view on a dumb terminal")
	require.True(t, IsInteractive(tty, tty), "a review may prompt there")
}
