package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Binary is a Go command that tests run as a user would, in processes of
// their own: it is built once per test binary, on first use, into a
// temporary folder that Remove deletes.
type Binary struct {
	// Pkg is the import path of the command's package.
	Pkg string

	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the command if it is not built yet and returns its path. A
// failed build fails the test with go build's output.
func (b *Binary) Path(tb testing.TB) string {
	tb.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "taskloom-bin-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, filepath.Base(b.Pkg))
		if out, err := exec.Command("go", "build", "-o", b.path, b.Pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w: %s", b.Pkg, err, out)
		}
	})
	require.NoError(tb, b.err)
	return b.path
}

// Remove deletes the built command, if any; TestMain calls it once the
// tests are done.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
