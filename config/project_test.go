package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDetectProject(t *testing.T) {
	for _, tc := range []struct {
		files  []string
		kind   string
		verify []string
	}{
		{[]string{"go.mod", "package.json"}, "go", []string{"go", "test", "./..."}},
		{[]string{"go.work"}, "go", []string{"go", "test", "./..."}},
		{[]string{"package.json", "requirements.txt"}, "node", []string{"npm", "test"}},
		{[]string{"setup.py"}, "python", []string{"python3", "-m", "pytest", "-q"}},
		{[]string{"README.md"}, "", nil},
	} {
		root := t.TempDir()
		for _, f := range tc.files {
			require.NoError(t, os.WriteFile(filepath.Join(root, f), nil, 0o644))
		}
		p := DetectProject(root)
		require.Equal(t, tc.kind, p.Kind, tc.files)
		require.Equal(t, tc.verify, p.Verify, tc.files)
		require.Equal(t, tc.kind != "go", GoWithoutModule(root, []string{"go", "test", "./..."}), tc.files)
	}
	require.False(t, GoWithoutModule(t.TempDir(), []string{"pytest"}), "only the go command needs a module")
}
