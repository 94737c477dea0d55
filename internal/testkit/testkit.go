// Package testkit holds the helpers the tests of several packages share:
// git with a fixed identity, repos made from a map of files, the -update
// flag of golden files, a fake clock, the taskloom binary built once, and
// the two-task notes fixture of the review tests. Only tests import it.
package testkit

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// GitEnv is the environment of the tests' own git commands: an identity,
// no system config, and no GIT_ variable inherited from a git that runs
// the tests (a hook would point them at its own repository).
func GitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1")
}

// Git runs git in dir and returns its stdout; a failure fails the test
// with what git printed on stderr.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = GitEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(tb, err, "git %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

// WriteFiles writes files (slash-separated path to content) below dir,
// making the folders they need.
func WriteFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(tb, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(tb, os.WriteFile(p, []byte(content), 0o644))
	}
}

// Repo makes a git repo in a new temporary folder whose branch main holds
// files in one commit, and returns the folder.
func Repo(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	Git(tb, dir, "init", "-q", "-b", "main")
	WriteFiles(tb, dir, files)
	Git(tb, dir, "add", "-A")
	Git(tb, dir, "commit", "-q", "-m", "init")
	return dir
}

// MainFile returns path as branch main of repo holds it, "" when main has
// no such file.
func MainFile(tb testing.TB, repo, path string) string {
	tb.Helper()
	cmd := exec.Command("git", "show", "main:"+path)
	cmd.Dir = repo
	cmd.Env = GitEnv()
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// The -update flag rewrites golden files. It is registered once for every
// test binary that imports this package, whichever test asks for it.
var update = flag.Bool("update", false, "rewrite golden files")

// Updating reports whether the tests run with -update.
func Updating() bool { return *update }
