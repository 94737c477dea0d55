package clip

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestLine(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"  boom\nmore\n", 0, "boom"},
		{"worker: exit code 1; its stderr ends:\nsetting up\nbroken\n\n", 0, "worker: exit code 1; its stderr ends: broken"},
		{"nothing after:\n\n", 0, "nothing after:"},
		{"first user message \"Task: T1 — write\"", 27, "first user message \"Task: T…"},
		{"Task — écrire", 6, "Task —…"},
		{"", 5, ""},
	} {
		got := Line(tt.in, tt.n)
		require.Equal(t, tt.want, got, "Line(%q, %d)", tt.in, tt.n)
		require.True(t, utf8.ValidString(got))
	}
}

func TestHeadAndTail(t *testing.T) {
	s := "ééééé" // 10 bytes, 5 runes
	require.Equal(t, "éé…", Head(s, 2))
	require.Equal(t, s, Head(s, 5))
	require.Equal(t, s, Head(s, 0))
	for n := 1; n < len(s); n++ {
		got := Tail(s, n)
		require.True(t, utf8.ValidString(got), "Tail(%q, %d) = %q", s, n, got)
		require.LessOrEqual(t, len(got), n+len("…"))
	}
	require.Equal(t, "…éé", Tail(s, 5))
	require.Equal(t, s, Tail(s, 10))
}
