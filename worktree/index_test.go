package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
)

// The index reader agrees with go-git's decoder on the indexes git writes:
// versions 2, 3 (an intent-to-add entry sets the extended flags) and 4
// (prefix-compressed names), with nested, long, spaced and non-ASCII names
// and a submodule; and what it cannot read directly still reads.
func TestReadIndexNames(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	testkit.Git(t, repo, "init", "-q", "-b", "main")
	files := map[string]string{
		"README.md":                       "hi\n",
		"a/b/c/deep.go":                   "package c\n",
		"a/b/sibling.go":                  "package b\n",
		"with space/naïve café.txt":       "x\n",
		strings.Repeat("long/", 30) + "f": "long\n",
	}
	for i := range 40 {
		files[filepath.ToSlash(filepath.Join("pkg", "file"+strings.Repeat("x", i)+".go"))] = "package pkg\n"
	}
	testkit.WriteFiles(t, repo, files)
	testkit.Git(t, repo, "add", "-A")
	testkit.Git(t, repo, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("1", 40)+",vendor/sub")
	testkit.WriteFiles(t, repo, map[string]string{"later.txt": "intent\n"})
	indexPath := filepath.Join(repo, ".git", "index")

	for _, version := range []string{"2", "3", "4"} {
		testkit.Git(t, repo, "update-index", "--index-version", version)
		if version == "3" {
			testkit.Git(t, repo, "add", "--intent-to-add", "later.txt")
		}
		data, err := os.ReadFile(indexPath)
		require.NoError(t, err)
		require.Equal(t, version, string('0'+rune(data[7])), "the index git wrote")

		var idx index.Index
		require.NoError(t, index.NewDecoder(strings.NewReader(string(data))).Decode(&idx))
		var want []indexEntry
		for _, e := range idx.Entries {
			want = append(want, indexEntry{name: e.Name, submodule: e.Mode == filemode.Submodule})
		}
		got, err := parseIndexNames(data)
		require.NoError(t, err, "version %s", version)
		require.Equal(t, want, got, "version %s", version)
		require.Contains(t, got, indexEntry{name: "vendor/sub", submodule: true})
		require.Contains(t, got, indexEntry{name: "with space/naïve café.txt"})

		// A file this reader refuses still reads, through go-git.
		bad := append([]byte(nil), data...)
		bad[7] = 9
		_, err = parseIndexNames(bad)
		require.ErrorIs(t, err, errIndexFormat)
		truncated := data[:len(data)/2]
		_, err = parseIndexNames(truncated)
		require.ErrorIs(t, err, errIndexFormat)
		got, err = readIndexNames(indexPath)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}
