package term

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeTerminal is a stdin that stands for a terminal.
type fakeTerminal struct{ io.Reader }

func (fakeTerminal) IsTerminal() bool { return true }

func TestIsInteractive(t *testing.T) {
	t.Parallel()
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		name string
		in   io.Reader
		out  io.Writer
		want bool
	}{
		{"forced", fakeTerminal{strings.NewReader("")}, &bytes.Buffer{}, true},
		{"buffers", strings.NewReader(""), &bytes.Buffer{}, false},
		{"null device", null, null, false},
		{"pipes", r, w, false},
	} {
		require.Equal(t, tc.want, IsInteractive(tc.in, tc.out), tc.name)
	}
}
