package verify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/proc"
)

// Real suites: the tools run for real, on fixtures with the cases that
// break parsers, and on real projects' own test suites.

// needTool skips a test whose tool is missing, saying how to install it,
// except in CI, where nothing may skip.
func needTool(t *testing.T, ok bool, what, install string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing in CI; .ci/run installs it (%s)", what, install)
	}
	t.Skipf("%s is missing; install it with: %s", what, install)
}

// copyTree copies the fixture dir src to dst, dropping a ".txt" suffix
// from file names (fixtures that must not build where they are).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, strings.TrimSuffix(rel, ".txt"))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	require.NoError(t, err)
}

// run runs a helper command for a test (not the command under test).
func run(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	res, err := proc.Run(context.Background(), proc.Cmd{Args: args, Dir: dir, Env: append(os.Environ(), env...), Timeout: 10 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s:\n%s", strings.Join(args, " "), res.Output)
	return res.Output
}

// Real Go modules' own suites, fetched with go get through the module
// proxy, run by verify beside the repo's own packages. Their subtests
// have "/" and spaces in their names (BurntSushi/toml's
// TestErrorPosition/array/missing-separator-02.toml).
const (
	tomlModule = "github.com/BurntSushi/toml"
	yamlModule = "gopkg.in/yaml.v3"
)

// goSuite makes a module from testdata/gosuite that depends on the real
// modules. It is made once per test binary.
func goSuite(t *testing.T) string {
	t.Helper()
	goSuiteMu.Lock()
	defer goSuiteMu.Unlock()
	if goSuiteDir == "" && goSuiteErr == nil {
		dir, err := os.MkdirTemp("", "taskloom-gosuite-")
		require.NoError(t, err)
		copyTree(t, filepath.Join("testdata", "gosuite"), dir)
		goSuiteDir = dir
		res, err := proc.Run(context.Background(), proc.Cmd{Args: []string{"go", "get", "-t", tomlModule + "@v1.6.0", yamlModule + "@v3.0.1"},
			Dir: dir, Env: append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off"), Timeout: 5 * time.Minute})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit code %d: %s", res.ExitCode, res.Output)
		}
		goSuiteErr = err
	}
	require.NoError(t, goSuiteErr, "go get the real modules through the Go module proxy")
	return goSuiteDir
}

var (
	goSuiteMu  sync.Mutex
	goSuiteDir string
	goSuiteErr error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if goSuiteDir != "" {
		_ = os.RemoveAll(goSuiteDir)
	}
	os.Exit(code)
}

func TestRealGoSuites(t *testing.T) {
	dir := goSuite(t)
	ctx := context.Background()
	env := &Opts{Env: []string{"GOWORK=off", "GOTOOLCHAIN=local"}, Timeout: 10 * time.Minute}

	t.Run("passing suites with / and spaces in subtest names pass", func(t *testing.T) {
		start := time.Now()
		v, err := Run(ctx, dir, Spec{Command: []string{"go", "test", "./...", tomlModule + "/...", yamlModule + "/..."}}, env)
		require.NoError(t, err)
		require.True(t, v.Passed, "exit code %d, failures %+v\n%s", v.ExitCode, v.Failures, v.Output)
		require.Equal(t, FormatGoJSON, v.Format)
		require.Empty(t, v.Failures)
		require.Zero(t, v.Failed)
		require.Greater(t, v.Total, 1000, "the real suites' tests are counted")
		require.GreaterOrEqual(t, v.Skipped, 1)
		t.Logf("real Go suites (%s, %s, own packages): %d tests, %d skipped, %s", tomlModule, yamlModule, v.Total, v.Skipped, time.Since(start).Round(time.Millisecond))
	})

	t.Run("failures are named as go test names them", func(t *testing.T) {
		fail := &Opts{Env: append(env.Env, "SUITE_FAIL=1"), Timeout: env.Timeout}
		v, err := Run(ctx, dir, Spec{Command: []string{"go", "test", "-timeout", "5s", "./parse", "./crash", "./notests", "./slow", tomlModule}}, fail)
		require.NoError(t, err)
		require.False(t, v.Passed)
		byName := map[string]Failure{}
		for _, f := range v.Failures {
			byName[f.Name] = f
		}
		names := func() []string {
			var n []string
			for _, f := range v.Failures {
				n = append(n, f.Package+" "+f.Name)
			}
			return n
		}()
		nested := byName["TestSplit/a/b/nested/deeper_still"]
		require.Contains(t, nested.Output, `Split("a/b") nested: forced failure`, "failures: %q", names)
		require.Contains(t, byName["TestNoTrailingNewline"].Output, "forced failure after output without a newline")
		require.Contains(t, byName["TestNilMap"].Output, "assignment to entry in nil map")
		require.NotContains(t, byName["TestNilMap"].Output, "testing.tRunner", "the runner's frames are trimmed")
		require.NotContains(t, byName["TestNilMap"].Output, dir, "paths are relative to the worktree")
		require.Contains(t, byName["TestForever"].Output, "test timed out after 5s")
		for _, f := range v.Failures {
			if f.Name == "TestForever" {
				continue // it did not finish: go test's -timeout stopped it
			}
			require.NotContains(t, f.Output, "did not finish", "%s: no invented parents or unfinished subtests", f.Name)
			require.NotEqual(t, "TestSplit/a", f.Name, "TestSplit/a is not a test of its own")
		}
		require.NotContains(t, strings.Join(names, "\n"), tomlModule+" ", "the real suite passes")
	})

	t.Run("a test binary killed by a signal", func(t *testing.T) {
		kill := &Opts{Env: append(env.Env, "SUITE_KILL=1"), Timeout: env.Timeout}
		v, err := Run(ctx, dir, Spec{Command: []string{"go", "test", "./crash"}}, kill)
		require.NoError(t, err)
		require.False(t, v.Passed)
		require.Len(t, v.Failures, 1, "%+v", v.Failures)
		require.Equal(t, "TestKilled", v.Failures[0].Name)
		require.Contains(t, v.Failures[0].Output, "the test did not finish")
	})

	t.Run("a package that does not build", func(t *testing.T) {
		b := t.TempDir()
		copyTree(t, filepath.Join("testdata", "gobroken"), b)
		require.NoError(t, os.WriteFile(filepath.Join(b, "go.mod"), []byte("module example.com/b\n\ngo 1.22\n"), 0o644))
		v, err := Run(ctx, b, Spec{Command: []string{"go", "test", "./..."}}, env)
		require.NoError(t, err)
		require.False(t, v.Passed)
		require.Len(t, v.Failures, 1)
		require.Equal(t, "[build failed]", v.Failures[0].Name)
		require.Contains(t, v.Failures[0].Output, "undefined: undefinedName")
	})

	t.Run("the verify timeout kills go test", func(t *testing.T) {
		slow := &Opts{Env: append(env.Env, "SUITE_FAIL=1"), Timeout: 5 * time.Second}
		v, err := Run(ctx, dir, Spec{Command: []string{"go", "test", "./slow"}}, slow)
		require.NoError(t, err)
		require.False(t, v.Passed)
		require.True(t, v.TimedOut)
		require.Contains(t, v.ErrorContext(4000), "timed out")
	})

	t.Run("a task's test files run first, then the command", func(t *testing.T) {
		v, err := Run(ctx, dir, Spec{TestFiles: []string{"parse/parse_test.go"}, Command: []string{"go", "test", "./notests"}}, env)
		require.NoError(t, err)
		require.True(t, v.Passed, v.Output)
		require.Equal(t, "go-json+go-json", v.Format)
		require.Contains(t, v.Output, "$ go test ./parse")
		require.Contains(t, v.Output, "$ go test ./notests")

		fail := &Opts{Env: append(env.Env, "SUITE_FAIL=1"), Timeout: env.Timeout}
		v, err = Run(ctx, dir, Spec{TestFiles: []string{"parse/parse_test.go"}, Command: []string{"sh", "-c", "echo ran; exit 0"}}, fail)
		require.NoError(t, err)
		require.False(t, v.Passed)
		require.Equal(t, FormatGoJSON, v.Format, "the command does not run once the task's own tests failed")
	})
}

func TestRealPytest(t *testing.T) {
	_, err := exec.LookPath("pytest")
	needTool(t, err == nil, "pytest", "apt-get install -y python3-pytest")
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "pysuite"), dir)
	ctx := context.Background()
	opts := &Opts{Timeout: 5 * time.Minute}

	t.Run("parametrized ids, classes, xfail, skip and a fixture error", func(t *testing.T) {
		start := time.Now()
		v, err := Run(ctx, dir, Spec{Command: []string{"pytest", "tests/test_cart.py"}}, opts)
		require.NoError(t, err)
		require.False(t, v.Passed)
		require.Equal(t, FormatPytestJUnit, v.Format, v.Output)
		require.Equal(t, 9, v.Total)
		require.Equal(t, 2, v.Skipped, "skip and xfail")
		got := map[string]Failure{}
		var names []string
		for _, f := range v.Failures {
			require.Equal(t, "tests/test_cart.py", f.Package)
			got[f.Name] = f
			names = append(names, f.Name)
		}
		require.ElementsMatch(t, []string{"test_parts[c/d/e]", "TestDiscount::test_half", "test_with_db"}, names)
		require.Contains(t, got["test_parts[c/d/e]"].Output, "assert 3 == 4")
		require.Contains(t, got["TestDiscount::test_half"].Output, "checking half", "captured stdout")
		require.Contains(t, got["test_with_db"].Output, "database is down")
		require.NotContains(t, v.ErrorContext(8000), dir)
		require.NotContains(t, v.Output, "generated xml file", "taskloom's own report file means nothing to a retry")
		t.Logf("pytest fixture: %d tests, %d failed, %d skipped, %s", v.Total, v.Failed, v.Skipped, time.Since(start).Round(time.Millisecond))
	})

	t.Run("a collection error behind make test", func(t *testing.T) {
		v, err := Run(ctx, dir, Spec{Command: []string{"make", "test"}}, opts)
		require.NoError(t, err)
		require.False(t, v.Passed)
		require.Equal(t, FormatPytestJUnit, v.Format, "PYTEST_ADDOPTS reaches the pytest behind make: %s", v.Output)
		require.Len(t, v.Failures, 1)
		require.Equal(t, "tests/test_broken.py", v.Failures[0].Name)
		require.Contains(t, v.Failures[0].Output, "No module named 'cart_that_does_not_exist'")
		require.NotContains(t, v.Failures[0].Output, "importlib", "the interpreter's frames are trimmed")
	})

	t.Run("passing", func(t *testing.T) {
		v, err := Run(ctx, dir, Spec{TestFiles: []string{"tests/test_cart.py"}, Command: []string{"pytest", "-k", "TestDiscount and not half"}}, opts)
		require.NoError(t, err)
		require.False(t, v.Passed, "the task's own test file runs first and fails")
		v, err = Run(ctx, dir, Spec{Command: []string{"pytest", "-k", "TestDiscount and not half", "tests/test_cart.py"}}, opts)
		require.NoError(t, err)
		require.True(t, v.Passed, v.Output)
		require.Equal(t, 2, v.Total)
	})
}

// jsRunners returns the node_modules that holds jest and vitest:
// $TASKLOOM_TEST_JS_RUNNERS/node_modules, by default under
// ~/.cache/taskloom-test-js, where .ci/run installs them.
func jsRunners(t *testing.T) string {
	t.Helper()
	root := os.Getenv("TASKLOOM_TEST_JS_RUNNERS")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "taskloom-test-js")
	}
	nm := filepath.Join(root, "node_modules")
	_, jestErr := os.Stat(filepath.Join(nm, ".bin", "jest"))
	_, vitestErr := os.Stat(filepath.Join(nm, ".bin", "vitest"))
	_, npmErr := exec.LookPath("npm")
	needTool(t, jestErr == nil && vitestErr == nil && npmErr == nil, "jest and vitest",
		"npm install --prefix "+root+" jest@29 vitest@3 vite@7")
	return nm
}

// jsFixture copies a JS fixture, with the cart suite both runners share,
// to a temp dir beside the test runners.
func jsFixture(t *testing.T, name string) string {
	t.Helper()
	nm := jsRunners(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "jscart"), dir)
	copyTree(t, filepath.Join("testdata", name), dir)
	require.NoError(t, os.Symlink(nm, filepath.Join(dir, "node_modules")))
	return dir
}

// checkJS checks what jest and vitest report on the same suite.
func checkJS(t *testing.T, v Verdict, dir, format string) map[string]Failure {
	t.Helper()
	require.False(t, v.Passed)
	require.Equal(t, format, v.Format, v.Output)
	got := map[string]Failure{}
	for _, f := range v.Failures {
		got[f.Name] = f
		require.NotContains(t, f.Output, "\x1b[", "%s: colour codes are stripped", f.Name)
		require.NotContains(t, f.Output, "node_modules", "%s: the runner's frames are trimmed", f.Name)
		require.NotContains(t, f.Output, dir, "%s: paths are relative", f.Name)
	}
	require.NotContains(t, v.Output, "\x1b[")
	applies := got["cart > discount > applies 50%"]
	require.Equal(t, "src/cart.test.js", applies.Package, "failures: %v", keys(got))
	require.Contains(t, applies.Output, "src/cart.test.js:", "the test's own frame stays")
	require.Contains(t, got["cart > parts of c/d/e > has 4 parts"].Output, "length")
	require.Contains(t, got["cart > snapshot of the total"].Output, "napshot")
	require.NotContains(t, got, "cart > parts of a/b > has 2 parts")
	require.NotContains(t, got, "cart > parts of x[1]::y > has 1 parts")
	return got
}

func keys(m map[string]Failure) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

func TestRealJest(t *testing.T) {
	dir := jsFixture(t, "jest")
	ctx := context.Background()
	opts := &Opts{Timeout: 5 * time.Minute}
	for _, cmd := range [][]string{{"npm", "test"}, {"npx", "--no", "jest", "--ci"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			start := time.Now()
			v, err := Run(ctx, dir, Spec{Command: cmd}, opts)
			require.NoError(t, err)
			got := checkJS(t, v, dir, FormatJestJSON)
			require.Contains(t, got["[test file failed to run]"].Output, "Cannot find module './refund-that-does-not-exist'")
			require.Equal(t, "src/broken.test.js", got["[test file failed to run]"].Package)
			require.Contains(t, v.ErrorContext(8000), "(jest, exit code 1)")
			t.Logf("jest fixture via %s: %d tests, %d failed, %d skipped, %s", strings.Join(cmd, " "), v.Total, v.Failed, v.Skipped, time.Since(start).Round(time.Millisecond))
		})
	}
}

func TestRealVitest(t *testing.T) {
	dir := jsFixture(t, "vitest")
	ctx := context.Background()
	opts := &Opts{Timeout: 5 * time.Minute}
	for _, cmd := range [][]string{{"npm", "run", "test"}, {"npx", "--no", "vitest"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			start := time.Now()
			v, err := Run(ctx, dir, Spec{Command: cmd}, opts)
			require.NoError(t, err)
			got := checkJS(t, v, dir, FormatVitestJSON)
			db := got["[test file failed to run]"]
			require.Equal(t, "src/db.test.js", db.Package)
			require.Contains(t, db.Output, "database is down", "the beforeAll's cause, from the console")
			require.Contains(t, v.ErrorContext(8000), "(vitest, exit code 1)")
			t.Logf("vitest fixture via %s: %d tests, %d failed, %d skipped, %s", strings.Join(cmd, " "), v.Total, v.Failed, v.Skipped, time.Since(start).Round(time.Millisecond))
		})
	}
}
