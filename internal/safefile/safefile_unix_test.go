//go:build unix

package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A named pipe nobody writes to is refused at once, for reading and for
// writing, where a plain open would wait forever.
func TestNamedPipeRefusedWithoutWaiting(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe")
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	done := make(chan error, 2)
	go func() { _, err := ReadFile(p, 0); done <- err }()
	go func() { done <- WriteFile(p, []byte("x"), 0o644) }()
	for range 2 {
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrNotRegular)
			require.ErrorContains(t, err, "named pipe")
		case <-time.After(10 * time.Second):
			t.Fatal("a named pipe held the caller")
		}
	}
}

func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("secret"), 0o644))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))
	_, err := ReadFile(link, 0)
	require.Error(t, err)
	require.NoError(t, WriteFile(target, []byte("ok"), 0o644))
	require.Error(t, WriteFile(link, []byte("over"), 0o644))
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "ok", string(data))
}

func TestReadLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(p)
	require.NoError(t, err)
	// A sparse file: its size costs no disk.
	require.NoError(t, f.Truncate(8<<30))
	require.NoError(t, f.Close())
	_, err = ReadFile(p, 1<<20)
	var tl *TooLargeError
	require.True(t, errors.As(err, &tl), "%v", err)
	require.Equal(t, int64(8<<30), tl.Size)

	small := filepath.Join(t.TempDir(), "small")
	require.NoError(t, WriteFile(small, []byte("hello\n"), 0o600))
	data, err := ReadFile(small, 6)
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(data))
	st, err := os.Stat(small)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}
