package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
)

func readVerifyTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// wantFailure is a failure a parser must report: its name, package, and
// substrings its output must hold.
type wantFailure struct {
	name, pkg string
	contains  []string
}

func checkCounts(t *testing.T, got counts, total, failed, skipped int, failures []wantFailure) {
	t.Helper()
	require.Equal(t, total, got.total, "total")
	require.Equal(t, failed, got.failed, "failed")
	require.Equal(t, skipped, got.skipped, "skipped")
	names := make([]string, len(got.failures))
	for i, f := range got.failures {
		names[i] = f.Package + " " + f.Name
	}
	require.Len(t, got.failures, len(failures), "failures: got %q", names)
	for i, w := range failures {
		f := got.failures[i]
		require.Equal(t, w.name, f.Name, "failure %d name", i)
		require.Equal(t, w.pkg, f.Package, "failure %d package", i)
		for _, s := range w.contains {
			require.Contains(t, f.Output, s, "failure %d (%s) output", i, f.Name)
		}
	}
}

func TestParseGoTestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file                   string
		total, failed, skipped int
		failures               []wantFailure
	}{
		{file: "go_pass.jsonl", total: 2},
		{file: "go_fail.jsonl", total: 5, failed: 2, skipped: 1, failures: []wantFailure{
			{"TestApply/100_10", "example.com/shop/fail", []string{"discount_test.go:12: Apply(100, 10) = 0, want 90", "--- FAIL: TestApply/100_10"}},
			{"TestApply/200_50", "example.com/shop/fail", []string{"Apply(200, 50) = -800, want 100"}},
		}},
		{file: "go_build_failed.jsonl", failed: 1, failures: []wantFailure{
			{"[build failed]", "example.com/shop/broken", []string{
				`broken/invoice.go:4:9: invalid operation: "INV-" + id (mismatched types untyped string and int)`,
				"broken/invoice.go:7:25: undefined: undefinedDays",
				"FAIL\texample.com/shop/broken [build failed]",
			}},
		}},
		{file: "go_build_failed_legacy.txt", total: 2, failed: 1, failures: []wantFailure{
			{"[build failed]", "example.com/shop/broken", []string{"broken/invoice.go:7:25: undefined: undefinedDays", "# example.com/shop/broken"}},
		}},
		{file: "go_vet_failed.jsonl", failed: 1, failures: []wantFailure{
			{"[build failed]", "example.com/shop/vetfail", []string{`vetfail/v_test.go:8:40: fmt.Printf format %d has arg "s" of wrong type string`}},
		}},
		{file: "go_setup_failed.jsonl", failed: 1, failures: []wantFailure{
			{"[setup failed]", "example.com/shop/setup", []string{"no required module provides package example.com/shop/nothere"}},
		}},
		{file: "go_panic.jsonl", total: 1, failed: 1, failures: []wantFailure{
			{"TestNilMap", "example.com/shop/panics", []string{"panic: assignment to entry in nil map", "p_test.go:7"}},
		}},
		{file: "go_timeout.jsonl", total: 2, failed: 1, failures: []wantFailure{
			{"TestForever", "example.com/shop/hang", []string{"panic: test timed out after 2s", "the test did not finish"}},
		}},
		{file: "go_killed.jsonl", total: 2, failed: 1, failures: []wantFailure{
			{"TestForever", "example.com/shop/hang", []string{"the test did not finish"}},
		}},
		{file: "go_mixed.jsonl", total: 8, failed: 4, skipped: 1, failures: []wantFailure{
			{"TestApply/100_10", "example.com/shop/fail", nil},
			{"TestApply/200_50", "example.com/shop/fail", nil},
			{"TestNilMap", "example.com/shop/panics", []string{"nil map"}},
			{"[build failed]", "example.com/shop/broken", []string{"undefined: undefinedDays"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			got, ok := parseGoTestJSON(string(readVerifyTestdata(t, tt.file)))
			require.True(t, ok, "no events found")
			checkCounts(t, got, tt.total, tt.failed, tt.skipped, tt.failures)
			for _, f := range got.failures {
				require.NotContains(t, f.Output, "=== RUN", "progress lines are dropped from %s", f.Name)
			}
		})
	}

	t.Run("not go test output", func(t *testing.T) {
		t.Parallel()
		_, ok := parseGoTestJSON("go: cannot find main module\n{\"not\": \"an event\"}\n")
		require.False(t, ok)
	})

	t.Run("text is what go test prints", func(t *testing.T) {
		t.Parallel()
		p := newGoTestParser()
		for l := range strings.Lines(string(readVerifyTestdata(t, "go_fail.jsonl"))) {
			p.line(strings.TrimSuffix(l, "\n"))
		}
		text := p.text.String()
		require.Contains(t, text, "=== RUN   TestApply\n")
		require.Contains(t, text, "    discount_test.go:12: Apply(100, 10) = 0, want 90\n")
		require.Contains(t, text, "FAIL\texample.com/shop/fail\t0.003s\n")
		require.NotContains(t, text, `"Action"`)
	})
}

func TestParsePytestJUnit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file                   string
		total, failed, skipped int
		failures               []wantFailure
	}{
		{file: "pytest_pass.xml", total: 3},
		{file: "pytest_fail.xml", total: 8, failed: 3, skipped: 2, failures: []wantFailure{
			{"test_discount[100-10-90]", "tests.test_cart", []string{"assert 0 == 90", "tests/test_cart.py:12: AssertionError", "> "}},
			{"test_number", "tests.test_invoice.TestInvoice", []string{"assert 'INV7' == 'INV-7'", "--- captured stdout ---", "numbering invoice 7"}},
			{"test_pdf", "tests.test_invoice", []string{`error: failed on setup with "FileNotFoundError`, "tests/test_invoice.py:14"}},
		}},
		{file: "pytest_collect_error.xml", total: 1, failed: 1, failures: []wantFailure{
			{"tests.test_broken", "", []string{"error: collection failure", "ModuleNotFoundError: No module named 'shop.invoices'"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			got, err := parsePytestJUnit(readVerifyTestdata(t, tt.file))
			require.NoError(t, err)
			checkCounts(t, got, tt.total, tt.failed, tt.skipped, tt.failures)
			for _, f := range got.failures {
				require.NotContains(t, f.Output, "where 0 = apply_discount(100, 10)\nprice = 100",
					"a message the traceback repeats is not repeated")
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		_, err := parsePytestJUnit([]byte("<testsuites><testsuite><testcase"))
		require.Error(t, err)
	})
}

func TestParsePytestSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                   string
		out                    string
		found                  bool
		total, failed, skipped int
		failures               []wantFailure
	}{
		{name: "pytest_pass.txt", found: true, total: 3},
		{name: "pytest_fail.txt", found: true, total: 7, failed: 2, skipped: 1, failures: []wantFailure{
			{"test_discount[100-10-90]", "tests/test_cart.py", []string{"where 0 = apply_discount(100, 10)", "tests/test_cart.py:12: AssertionError"}},
			{"TestInvoice::test_number", "tests/test_invoice.py", []string{"- INV-7", "Captured stdout call", "numbering invoice 7"}},
		}},
		{name: "pytest_collect_error.txt", found: true, total: 1, failed: 1, failures: []wantFailure{
			{"tests/test_broken.py", "tests/test_broken.py", []string{"ImportError while importing test module", "No module named 'shop.invoices'"}},
		}},
		{name: "pytest_quiet.txt", found: true, total: 4, failed: 1, failures: []wantFailure{
			{"test_refund", "tests/test_refund.py", []string{"assert 50 == -50", "tests/test_refund.py:4"}},
		}},
		{name: "errors and xfail", out: "==== 1 failed, 2 errors, 3 passed, 1 xfailed, 1 xpassed, 4 warnings in 1.50s (0:00:01) ====\n",
			found: true, total: 8, failed: 3, skipped: 1},
		{name: "no summary line, only the message", out: "FAILED t.py::test_a - boom\n= 1 failed in 0.01s =\n",
			found: true, total: 1, failed: 1, failures: []wantFailure{{"test_a", "t.py", []string{"boom"}}}},
		{name: "no tests ran", out: "============================ no tests ran in 0.01s =============================\n", found: true},
		{name: "go test output", out: "ok  \texample.com/shop/pass\t0.004s\n"},
		{name: "other timing line", out: "Downloaded 3 files in 2.5s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := tt.out
			if out == "" {
				out = string(readVerifyTestdata(t, tt.name))
			}
			got, found := parsePytestSummary(out)
			require.Equal(t, tt.found, found, "found")
			checkCounts(t, got, tt.total, tt.failed, tt.skipped, tt.failures)
		})
	}
}

func TestParseJestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file                   string
		total, failed, skipped int
		failures               []wantFailure
	}{
		{file: "jest_pass.json", total: 2},
		{file: "jest_fail.json", total: 5, failed: 2, skipped: 1, failures: []wantFailure{
			{"cart > discount > applies the percentage", "src/cart.test.ts", []string{"Expected: 90\nReceived: 0", "cart.test.ts:14:38"}},
			{"[test file failed to run]", "src/invoice.test.ts", []string{"Cannot find module './invoice'"}},
		}},
		{file: "vitest_fail.json", total: 4, failed: 1, skipped: 1, failures: []wantFailure{
			{"refund > negates the amount", "src/refund.test.ts", []string{"expected 50 to be -50"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			got, err := parseJestJSON(readVerifyTestdata(t, tt.file), "/work/shop", "")
			require.NoError(t, err)
			checkCounts(t, got, tt.total, tt.failed, tt.skipped, tt.failures)
			for _, f := range got.failures {
				require.NotContains(t, f.Output, "\x1b[", "ANSI escapes are stripped")
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		_, err := parseJestJSON([]byte(`{"numTotalTests": "two"}`), "/", "")
		require.Error(t, err)
	})
}

func TestPrepare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{
		"package.json": `{"scripts": {"test": "tsc -p . && jest --ci", "test:unit": "vitest", "lint": "jest && eslint .",
			"pytest": "pytest -q", "gotest": "go test ./..."}}`,
		"Makefile": "GO ?= go\n\n.PHONY: test\nbuild:\n\tgo build ./...\n\ntest:\n\t@go test -race ./...\n\npy:\n\tpython3 -m pytest tests\n\nall: build\n\tgo vet ./...\n\tgo test ./...\n",
	})
	const tmp = "/tmp/r"
	junit := "PYTEST_ADDOPTS=--junitxml=/tmp/r/junit.xml -o junit_family=xunit1"
	tests := []struct {
		argv   string
		want   string
		kind   runner
		report string
		env    []string
	}{
		{"go test ./...", "go test -json ./...", runnerGo, "", nil},
		{"/usr/local/go/bin/go test -run TestX ./a", "/usr/local/go/bin/go test -json -run TestX ./a", runnerGo, "", nil},
		{"go test -json ./...", "go test -json ./...", runnerGo, "", nil},
		{"go test ./a -args -json", "go test -json ./a -args -json", runnerGo, "", nil},
		{"go -C backend test ./api", "go -C backend test -json ./api", runnerGo, "", nil},
		{"go vet ./...", "go vet ./...", runnerOther, "/tmp/r/junit.xml", []string{junit}},
		{"python3 -m pytest -q tests", "python3 -m pytest --junitxml=/tmp/r/junit.xml -o junit_family=xunit1 -q tests", runnerPytest, "/tmp/r/junit.xml", nil},
		{"uv run pytest", "uv run pytest --junitxml=/tmp/r/junit.xml -o junit_family=xunit1", runnerPytest, "/tmp/r/junit.xml", nil},
		{"pytest --junitxml out/j.xml", "pytest --junitxml out/j.xml", runnerPytest, dir + "/out/j.xml", nil},
		{"npx jest src", "npx -- jest --json --outputFile=/tmp/r/report.json src", runnerJest, "/tmp/r/report.json", nil},
		{"npx jest --json --outputFile=r.json", "npx -- jest --json --outputFile=r.json", runnerJest, dir + "/r.json", nil},
		{"node node_modules/.bin/jest --json", "node node_modules/.bin/jest --outputFile=/tmp/r/report.json --json", runnerJest, "/tmp/r/report.json", nil},
		{"npx vitest", "npx -- vitest run --reporter=default --reporter=json --outputFile=/tmp/r/report.json", runnerVitest, "/tmp/r/report.json", nil},
		{"pnpm vitest run src", "pnpm vitest run --reporter=default --reporter=json --outputFile=/tmp/r/report.json src", runnerVitest, "/tmp/r/report.json", nil},
		{"npx vitest run --reporter=verbose", "npx -- vitest run --reporter=json --outputFile=/tmp/r/report.json --reporter=verbose", runnerVitest, "/tmp/r/report.json", nil},
		// Wrappers: the runner behind the script gets the options.
		{"npm test", "npm test -- --json --outputFile=/tmp/r/report.json", runnerJest, "/tmp/r/report.json", nil},
		{"npm run test -- src", "npm run test -- src --json --outputFile=/tmp/r/report.json", runnerJest, "/tmp/r/report.json", nil},
		{"yarn test", "yarn test --json --outputFile=/tmp/r/report.json", runnerJest, "/tmp/r/report.json", nil},
		{"pnpm run test:unit", "pnpm run test:unit --run --reporter=default --reporter=json --outputFile=/tmp/r/report.json", runnerVitest, "/tmp/r/report.json", nil},
		{"npm run lint", "npm run lint", runnerOther, "/tmp/r/junit.xml", []string{junit}},
		{"npm run pytest", "npm run pytest", runnerPytest, "/tmp/r/junit.xml", []string{junit}},
		{"npm run gotest", "npm run gotest", runnerGo, "", []string{"GOFLAGS=-json"}},
		{"make test", "make test", runnerGo, "", []string{"GOFLAGS=-json"}},
		{"make -k test", "make -k test", runnerGo, "", []string{"GOFLAGS=-json"}},
		{"make py", "make py", runnerPytest, "/tmp/r/junit.xml", []string{junit}},
		{"make all", "make all", runnerOther, "/tmp/r/junit.xml", []string{junit}},
	}
	for _, tt := range tests {
		t.Run(tt.argv, func(t *testing.T) {
			t.Parallel()
			argv := strings.Fields(tt.argv)
			orig := strings.Join(argv, " ")
			got := prepare(dir, argv, tmp)
			require.Equal(t, tt.want, strings.Join(got.argv, " "))
			require.Equal(t, tt.kind, got.kind, "runner")
			require.Equal(t, tt.report, got.report, "report file")
			require.Equal(t, tt.env, got.env, "environment")
			require.Equal(t, orig, strings.Join(argv, " "), "the caller's argv is not modified")
		})
	}
}

func TestDeriveCommands(t *testing.T) {
	t.Parallel()
	project := func(files map[string]string) string {
		dir := t.TempDir()
		testkit.WriteFiles(t, dir, files)
		return dir
	}
	goDir := project(map[string]string{"go.mod": "module m\n"})
	monorepo := project(map[string]string{"backend/go.mod": "module b\n", "tools/go.mod": "module t\n"})
	workspace := project(map[string]string{"go.work": "go 1.22\n"})
	pytestDir := project(map[string]string{"pyproject.toml": "[tool.pytest.ini_options]\n"})
	jestDir := project(map[string]string{"package.json": `{"devDependencies": {"jest": "^29.0.0"}}`})
	vitestDir := project(map[string]string{"package.json": `{"devDependencies": {"vitest": "^3.2.0"}}`})
	nodeTestDir := project(map[string]string{"package.json": `{"scripts": {"test": "node --test"}}`})
	tests := []struct {
		name    string
		dir     string
		files   []string
		want    []string
		command []string
	}{
		{"none", "", nil, nil, nil},
		{"go packages, deduplicated and sorted", goDir, []string{"b/x_test.go", "a/y_test.go", "./b/z_test.go", "b/x.go"}, []string{"go test ./a ./b"}, nil},
		{"go root package", goDir, []string{"main_test.go"}, []string{"go test ."}, nil},
		{"go package in a dot folder", goDir, []string{".tools/lint/x_test.go"}, []string{"go test ./.tools/lint"}, nil},
		{"go modules in folders", monorepo, []string{"backend/api/a_test.go", "tools/t_test.go", "backend/b_test.go"}, []string{"go -C backend test . ./api", "go -C tools test ."}, nil},
		{"go workspace", workspace, []string{"svc/a_test.go"}, []string{"go test ./svc"}, nil},
		{"go file in no module", "", []string{"a_test.go"}, nil, nil},
		{"go tags of the suite", goDir, []string{"a/a_test.go"}, []string{"go test -tags integration ./a"}, []string{"go", "test", "-tags", "integration", "./..."}},
		{"pytest", "", []string{"tests/test_cart.py", "tests/conftest.py", "cart_test.py"}, []string{"python3 -m pytest tests/test_cart.py cart_test.py"}, nil},
		{"pytest from the project's config", pytestDir, []string{"tests/test_a.py"}, []string{"python3 -m pytest tests/test_a.py"}, []string{"make", "test"}},
		{"unittest", "", []string{"tests/test_a.py"}, nil, []string{"python3", "-m", "unittest", "discover", "-s", "tests"}},
		{"jest from package.json", jestDir, []string{"src/a.test.ts", "src/b.spec.jsx", "src/c.ts"}, []string{"npx --no jest src/a.test.ts src/b.spec.jsx"}, nil},
		{"vitest from package.json", vitestDir, []string{"src/a.test.ts"}, []string{"npx --no vitest run src/a.test.ts"}, nil},
		{"node --test", nodeTestDir, []string{"test/a.test.js"}, nil, []string{"npm", "test"}},
		{"several kinds", goDir, []string{"a_test.go", "test_a.py", "conftest.py"}, []string{"go test .", "python3 -m pytest test_a.py"}, nil},
		{"unrecognised", "", []string{"README.md", "spec/a_spec.rb"}, nil, nil},
		// The project's own runner runs the task's files too.
		{"pytest from the PATH", "", []string{"tests/test_a.py"}, []string{"pytest tests/test_a.py"}, []string{"pytest", "-q"}},
		{"pytest of another python", "", []string{"test_a.py"}, []string{"/opt/py/bin/python -m pytest test_a.py"}, []string{"/opt/py/bin/python", "-m", "pytest", "-x"}},
		{"jest through npx", "", []string{"a.test.js"}, []string{"npx jest a.test.js"}, []string{"npx", "jest", "--ci"}},
		{"vitest by path", "", []string{"a.test.ts"}, []string{"node_modules/.bin/vitest run a.test.ts"}, []string{"node_modules/.bin/vitest", "run"}},
		{"a script names no runner", "", []string{"test_a.py"}, nil, []string{"make", "test"}},
		{"pytest node IDs", "", []string{"tests/test_a.py::test_b", "tests/test_c.py"}, []string{"pytest tests/test_a.py::test_b tests/test_c.py"}, []string{"pytest"}},
		{"a node ID in a unittest project", "", []string{"tests/test_a.py::TestA::test_b"}, nil, []string{"python3", "-m", "unittest", "discover", "-s", "tests"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := tt.dir
			if dir == "" {
				dir = t.TempDir()
			}
			var got []string
			for _, c := range deriveCommands(dir, tt.files, tt.command) {
				got = append(got, strings.Join(c, " "))
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestTrimHeadTail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("abcdefghij", 100) // 1000 bytes, no newlines
	tests := []struct {
		name  string
		in    string
		limit int
	}{
		{"short", "hello", 10},
		{"exact", long[:100], 100},
		{"no limit", long, 0},
		{"long", long, 200},
		{"long, odd limit", long, 101},
		{"multibyte", strings.Repeat("héllo wörld ✓ ", 80), 150},
		{"limit below the marker", long, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := trimHeadTail(tt.in, tt.limit)
			require.True(t, utf8.ValidString(got), "valid UTF-8: %q", got)
			if tt.limit <= 0 || len(tt.in) <= tt.limit {
				require.Equal(t, tt.in, got)
				return
			}
			m := markerRE.FindStringSubmatchIndex(got)
			if tt.limit < 30 {
				require.Contains(t, got, "bytes elided")
				return
			}
			require.LessOrEqual(t, len(got), tt.limit)
			require.NotNil(t, m, "marker in %q", got)
			head, tail := got[:m[0]], got[m[1]:]
			n, err := strconv.Atoi(got[m[2]:m[3]])
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(tt.in, head), "head %q", head)
			require.True(t, strings.HasSuffix(tt.in, tail), "tail %q", tail)
			require.Equal(t, len(tt.in), len(head)+n+len(tail), "elided count")
			require.Greater(t, len(head), tt.limit/4, "head kept")
			require.Greater(t, len(tail), tt.limit/4, "tail kept")
		})
	}

	t.Run("cuts at line boundaries", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		for i := range 200 {
			fmt.Fprintf(&b, "line %03d\n", i)
		}
		got := trimHeadTail(b.String(), 300)
		require.LessOrEqual(t, len(got), 300)
		for l := range strings.Lines(got) {
			require.Regexp(t, `^(line \d{3}|… \d+ bytes elided …)?\n$`, l)
		}
		require.True(t, strings.HasPrefix(got, "line 000\n"))
		require.True(t, strings.HasSuffix(got, "line 199\n"))
	})

	t.Run("cut twice", func(t *testing.T) {
		t.Parallel()
		// The runner's output is cut as it streams, then again to fit
		// the verdict: the second marker counts all that is gone.
		in := strings.Repeat("0123456789", 100000)
		b := newHeadTail(4000, 4000)
		b.WriteString(in)
		got := trimHeadTail(b.String(), 1000)
		m := markerRE.FindStringSubmatchIndex(got)
		require.NotNil(t, m)
		require.Len(t, markerRE.FindAllString(got, -1), 1)
		n, err := strconv.Atoi(got[m[2]:m[3]])
		require.NoError(t, err)
		require.Equal(t, len(in), m[0]+n+len(got)-m[1])
	})

	t.Run("streaming buffer", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("0123456789", 5000)
		b := newHeadTail(100, 300)
		for i := 0; i < len(in); i += 7 {
			b.WriteString(in[i:min(i+7, len(in))])
		}
		got := b.String()
		m := markerRE.FindStringSubmatchIndex(got)
		require.NotNil(t, m)
		head, tail := got[:m[0]], got[m[1]:]
		n, err := strconv.Atoi(got[m[2]:m[3]])
		require.NoError(t, err)
		require.Equal(t, in[:100], head)
		require.Equal(t, in[len(in)-300:], tail)
		require.Equal(t, len(in)-400, n)
		require.Equal(t, len(in), b.Len())

		small := newHeadTail(100, 300)
		small.WriteString("just this")
		require.Equal(t, "just this", small.String())
	})
}

func TestRunKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	v, err := Run(context.Background(), dir, Spec{Command: []string{"sh", "-c", "sleep 60 & echo $! > pid; echo waiting; wait"}}, &Opts{Timeout: time.Second})
	require.NoError(t, err)
	require.True(t, v.TimedOut)
	require.False(t, v.Passed)
	require.Contains(t, v.Output, "waiting")
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the command wrote its child's pid")
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	// On a busy machine the PID may already belong to another process:
	// only a process that is still our "sleep 60" counts as alive.
	if processArgs(t, pid) != "sleep 60" {
		return
	}
	require.True(t, processExits(t, pid, 10*time.Second), "the background child %d was killed with its group", pid)
}

// goEnv keeps go test on the installed toolchain and out of any
// workspace around the temp dir.
var goEnv = []string{"GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS="}

func TestVerifyGoTest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{
		"go.mod":           "module example.com/v\n\ngo 1.21\n",
		"sum/sum.go":       "package sum\n\nfunc Sum(a, b int) int { return a + b }\n",
		"sum/sum_test.go":  "package sum\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif Sum(2, 2) != 4 {\n\t\tt.Fatal(\"Sum(2, 2) != 4\")\n\t}\n}\n",
		"double/double.go": "package double\n\nfunc Double(n int) int { return n*2 + 1 }\n",
		"double/double_test.go": "package double\n\nimport \"testing\"\n\n" +
			"func TestDouble(t *testing.T) {\n\tif got := Double(2); got != 4 {\n\t\tt.Errorf(\"Double(2) = %d, want 4\", got)\n\t}\n}\n\n" +
			"func TestZero(t *testing.T) {\n\tt.Skip(\"later\")\n}\n",
		// A TestMain that exits 0 whatever the tests did.
		"hush/hush_test.go": "package hush\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n" +
			"func TestMain(m *testing.M) { m.Run(); os.Exit(0) }\n\n" +
			"func TestHush(t *testing.T) { t.Fatal(\"hush is broken\") }\n",
		"broken/broken.go":      "package broken\n\nfunc F() int { return nope }\n",
		"broken/broken_test.go": "package broken\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) { F() }\n",
	})

	t.Run("passing package, command derived from the test files", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{TestFiles: []string{"sum/sum_test.go"}, FilesToCreate: []string{"sum/sum.go", "sum/sum_test.go"}}, &Opts{Env: goEnv})
		require.NoError(t, err)
		require.True(t, rep.Passed, "report: %+v", rep)
		require.Equal(t, FormatGoJSON, rep.Format)
		require.Equal(t, 1, rep.Total)
		require.Empty(t, rep.Failures)
		require.Contains(t, rep.Output, "example.com/v/sum")
		require.NotContains(t, rep.Output, `"Action"`)
		require.Empty(t, rep.ErrorContext(1000))
	})

	// go test passes on a package whose test file was never written: the
	// file is missing, and the try fails. A pattern needs one match.
	t.Run("test file never written", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{TestFiles: []string{"sum/sum_more_test.go", "sum/*_test.go"}}, &Opts{Env: goEnv})
		require.NoError(t, err)
		require.False(t, rep.Passed)
		require.Equal(t, []string{"sum/sum_more_test.go"}, rep.MissingFiles)
		require.Contains(t, rep.ErrorContext(1000), "missing files (files_to_create, test_files): sum/sum_more_test.go")
	})

	t.Run("failing test and a missing file", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{Command: []string{"go", "test", "./sum", "./double"}, FilesToCreate: []string{"sum/sum.go", "double/double.go", "double/README.md"}}, &Opts{Env: goEnv})
		require.NoError(t, err)
		require.False(t, rep.Passed)
		require.Equal(t, FormatGoJSON, rep.Format)
		require.Equal(t, 1, rep.ExitCode)
		require.Equal(t, []string{"double/README.md"}, rep.MissingFiles)
		require.Equal(t, 3, rep.Total)
		require.Equal(t, 1, rep.Failed)
		require.Equal(t, 1, rep.Skipped)
		require.Len(t, rep.Failures, 1)
		require.Equal(t, "TestDouble", rep.Failures[0].Name)
		require.Equal(t, "example.com/v/double", rep.Failures[0].Package)
		require.Contains(t, rep.Failures[0].Output, "Double(2) = 5, want 4")

		ec := rep.ErrorContext(2000)
		require.LessOrEqual(t, len(ec), 2000)
		require.Contains(t, ec, "missing files (files_to_create, test_files): double/README.md")
		require.Contains(t, ec, "1 of 3 tests failed (go test, exit code 1)")
		require.Contains(t, ec, "--- FAIL: TestDouble (example.com/v/double)")
		require.Contains(t, ec, "Double(2) = 5, want 4")
	})

	t.Run("a test fails, though go test exits 0", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{TestFiles: []string{"hush/hush_test.go"}}, &Opts{Env: goEnv})
		require.NoError(t, err)
		require.Zero(t, rep.ExitCode, "go test itself passes it")
		require.False(t, rep.Passed, "the stream names a failing test")
		require.Equal(t, 1, rep.Failed)
		require.Equal(t, "TestHush", rep.Failures[0].Name)
		ec := rep.ErrorContext(1000)
		require.Contains(t, ec, "1 of 1 tests failed (go test), though the test command exited 0: a test that fails fails the task")
		require.Contains(t, ec, "hush is broken")
	})

	t.Run("package that does not compile", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{TestFiles: []string{"broken/broken_test.go"}}, &Opts{Env: goEnv})
		require.NoError(t, err)
		require.False(t, rep.Passed)
		require.Equal(t, FormatGoJSON, rep.Format)
		require.Len(t, rep.Failures, 1)
		require.Equal(t, "[build failed]", rep.Failures[0].Name)
		require.Equal(t, "example.com/v/broken", rep.Failures[0].Package)
		require.Contains(t, rep.Failures[0].Output, "broken/broken.go:3:23: undefined: nope")
		require.Contains(t, rep.ErrorContext(1000), "undefined: nope")
	})

	t.Run("package that does not exist", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{TestFiles: []string{"gone/gone_test.go"}}, &Opts{Env: goEnv})
		require.NoError(t, err)
		require.False(t, rep.Passed)
		require.NotZero(t, rep.ExitCode)
		require.Contains(t, rep.ErrorContext(1000), "gone")
	})
}

// fakeRunner writes an executable script named name into a new bin
// directory and returns that directory.
func fakeRunner(t *testing.T, name, script string) string {
	t.Helper()
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+script), 0o755))
	return bin
}

func TestVerifyReportFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	testdata, err := filepath.Abs("testdata")
	require.NoError(t, err)

	t.Run("pytest writes junit xml", func(t *testing.T) {
		t.Parallel()
		// The fake pytest copies a junit sample to the --junitxml path
		// Verify adds, prints a summary that disagrees, and fails.
		bin := fakeRunner(t, "pytest", `for a in "$@"; do case "$a" in --junitxml=*) cp "$SAMPLES/pytest_fail.xml" "${a#--junitxml=}";; esac; done
echo "=== 1 failed in 0.01s ==="
exit 1
`)
		rep, err := Run(ctx, t.TempDir(), Spec{Command: []string{filepath.Join(bin, "pytest"), "-q"}}, &Opts{Env: []string{"SAMPLES=" + testdata}})
		require.NoError(t, err)
		require.Equal(t, FormatPytestJUnit, rep.Format)
		require.False(t, rep.Passed)
		require.Equal(t, 8, rep.Total)
		require.Equal(t, 3, rep.Failed)
	})

	// A project whose own test runs a pytest on a fixture meant to fail
	// (a plugin's tests, a tool that wraps pytest), behind a command
	// taskloom does not know: that pytest writes the report
	// PYTEST_ADDOPTS asks for, but the command's exit 0 decides.
	t.Run("a report through PYTEST_ADDOPTS does not fail an exit 0", func(t *testing.T) {
		t.Parallel()
		bin := fakeRunner(t, "check.sh", `f=$(printf '%s\n' "$PYTEST_ADDOPTS" | sed -n 's/.*--junitxml=\([^ ]*\).*/\1/p')
cp "$SAMPLES/pytest_fail.xml" "$f"
exit 0
`)
		rep, err := Run(ctx, t.TempDir(), Spec{Command: []string{filepath.Join(bin, "check.sh")}}, &Opts{Env: []string{"SAMPLES=" + testdata}})
		require.NoError(t, err)
		require.Equal(t, FormatPytestJUnit, rep.Format, "the report was written and read")
		require.True(t, rep.Passed, rep.ErrorContext(500))
	})

	t.Run("pytest without xml falls back to the summary", func(t *testing.T) {
		t.Parallel()
		bin := fakeRunner(t, "pytest", `cat "$SAMPLES/pytest_quiet.txt"; exit 1`)
		rep, err := Run(ctx, t.TempDir(), Spec{Command: []string{filepath.Join(bin, "pytest")}}, &Opts{Env: []string{"SAMPLES=" + testdata}})
		require.NoError(t, err)
		require.Equal(t, FormatPytestSummary, rep.Format)
		require.Equal(t, 4, rep.Total)
		require.Equal(t, 1, rep.Failed)
		require.Equal(t, "test_refund", rep.Failures[0].Name)
	})

	t.Run("jest writes json", func(t *testing.T) {
		t.Parallel()
		bin := fakeRunner(t, "jest", `for a in "$@"; do case "$a" in --outputFile=*) cp "$SAMPLES/jest_fail.json" "${a#--outputFile=}";; esac; done
echo "Tests: 1 failed, 3 passed, 5 total" >&2
exit 1
`)
		rep, err := Run(ctx, t.TempDir(), Spec{Command: []string{filepath.Join(bin, "jest")}}, &Opts{Env: []string{"SAMPLES=" + testdata}})
		require.NoError(t, err)
		require.Equal(t, FormatJestJSON, rep.Format)
		require.False(t, rep.Passed)
		require.Equal(t, 5, rep.Total)
		require.Equal(t, 2, rep.Failed)
		require.Contains(t, rep.Output, "Tests: 1 failed")
	})

	t.Run("vitest gets run and the json reporter", func(t *testing.T) {
		t.Parallel()
		bin := fakeRunner(t, "vitest", `[ "$1" = run ] || { echo "not in run mode: $*"; exit 9; }
for a in "$@"; do case "$a" in --outputFile=*) cp "$SAMPLES/vitest_fail.json" "${a#--outputFile=}";; esac; done
exit 1
`)
		rep, err := Run(ctx, t.TempDir(), Spec{Command: []string{filepath.Join(bin, "vitest")}}, &Opts{Env: []string{"SAMPLES=" + testdata}})
		require.NoError(t, err)
		require.Equal(t, FormatVitestJSON, rep.Format, "output: %s", rep.Output)
		require.Equal(t, 1, rep.Failed)
		require.Equal(t, "refund > negates the amount", rep.Failures[0].Name)
	})

	t.Run("a pipe in the report's place is not read", func(t *testing.T) {
		t.Parallel()
		// The tests can write where the report goes: a named pipe there
		// would hold the run, past verify.timeout and Ctrl-C.
		bin := fakeRunner(t, "pytest", `for a in "$@"; do case "$a" in --junitxml=*) mkfifo "${a#--junitxml=}";; esac; done
echo "=== 1 failed in 0.01s ==="
exit 1
`)
		done := make(chan Verdict, 1)
		go func() {
			rep, err := Run(ctx, t.TempDir(), Spec{Command: []string{filepath.Join(bin, "pytest")}}, nil)
			assert.NoError(t, err)
			done <- rep
		}()
		select {
		case rep := <-done:
			require.False(t, rep.Passed)
			require.Equal(t, FormatPytestSummary, rep.Format)
		case <-time.After(30 * time.Second):
			t.Fatal("a pipe in the report's place held the verify")
		}
	})

	t.Run("go test json from another command", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, t.TempDir(), Spec{Command: []string{"sh", "-c", `cat "$SAMPLES/go_fail.jsonl"; exit 1`}}, &Opts{Env: []string{"SAMPLES=" + testdata}})
		require.NoError(t, err)
		require.Equal(t, FormatGoJSON, rep.Format)
		require.Equal(t, 2, rep.Failed)
	})
}

func TestVerifyExitCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{"a.txt": "a", "sub/b.txt": "b", "README.md": "r"})

	t.Run("nothing to run, files exist", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{TestFiles: []string{"README.md"}, FilesToCreate: []string{"a.txt", "./sub/b.txt"}}, &Opts{})
		require.NoError(t, err)
		require.True(t, rep.Passed)
		require.Equal(t, FormatNone, rep.Format)
	})

	t.Run("a pytest node ID names its file", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{TestFiles: []string{"a.txt::test_a", "c.txt::test_c"}}, &Opts{})
		require.NoError(t, err)
		require.Equal(t, []string{"c.txt::test_c"}, rep.MissingFiles)
	})

	t.Run("nothing to run, files missing", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{FilesToCreate: []string{"a.txt", "c.txt", "../a.txt"}}, &Opts{})
		require.NoError(t, err)
		require.False(t, rep.Passed)
		require.Equal(t, []string{"c.txt", "../a.txt"}, rep.MissingFiles)
		require.Equal(t, "missing files (files_to_create, test_files): c.txt, ../a.txt", rep.ErrorContext(1000))
	})

	t.Run("passing command", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{Command: []string{"true"}, FilesToCreate: []string{"a.txt"}}, &Opts{})
		require.NoError(t, err)
		require.True(t, rep.Passed)
		require.Equal(t, FormatExitCode, rep.Format)
	})

	t.Run("failing command", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{Command: []string{"sh", "-c", "echo boom; exit 2"}}, &Opts{})
		require.NoError(t, err)
		require.False(t, rep.Passed)
		require.Equal(t, 2, rep.ExitCode)
		require.Equal(t, FormatExitCode, rep.Format)
		require.Equal(t, "the test command exited with code 2\noutput:\nboom", rep.ErrorContext(1000))
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		rep, err := Run(ctx, dir, Spec{Command: []string{"sh", "-c", "echo started; sleep 60"}}, &Opts{Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		require.False(t, rep.Passed)
		require.True(t, rep.TimedOut)
		require.Contains(t, rep.Output, "started")
		ec := rep.ErrorContext(1000)
		require.True(t, strings.HasPrefix(ec, "the tests timed out after "), ec)
		require.Contains(t, ec, "started")
	})

	t.Run("command not found is an error", func(t *testing.T) {
		t.Parallel()
		_, err := Run(ctx, dir, Spec{Command: []string{"taskloom-no-such-runner"}}, &Opts{})
		require.ErrorIs(t, err, exec.ErrNotFound)
	})

	t.Run("cancelled context is an error", func(t *testing.T) {
		t.Parallel()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := Run(cctx, dir, Spec{Command: []string{"true"}}, &Opts{})
		require.True(t, errors.Is(err, context.Canceled), "err: %v", err)
	})
}

func TestMerge(t *testing.T) {
	t.Parallel()
	got := merge(Verdict{Format: FormatNone}, []Verdict{
		{Passed: true, Format: FormatGoJSON, Total: 3, Output: "ok"},
		{Format: FormatPytestJUnit, ExitCode: 1, Total: 2, Failed: 1, Skipped: 1,
			Failures: []Failure{{Name: "test_a"}}, Output: "1 failed"},
	})
	require.False(t, got.Passed)
	require.Equal(t, "go-json+pytest-junit", got.Format)
	require.Equal(t, 1, got.ExitCode)
	require.Equal(t, [3]int{5, 1, 1}, [3]int{got.Total, got.Failed, got.Skipped})
	require.Equal(t, "ok\n1 failed", got.Output)
	require.Len(t, got.Failures, 1)

	// The suite runs the task's tests again: they count once.
	same := merge(Verdict{}, []Verdict{
		{Passed: true, Format: FormatGoJSON, Total: 1},
		{Passed: true, Format: FormatGoJSON, Total: 4, Skipped: 1},
	})
	require.Equal(t, [3]int{4, 0, 1}, [3]int{same.Total, same.Failed, same.Skipped})
	require.Equal(t, "go test", same.Runner())

	passed := merge(Verdict{}, []Verdict{{Passed: true, Format: FormatExitCode}})
	require.True(t, passed.Passed)
	missing := merge(Verdict{MissingFiles: []string{"a.go"}}, []Verdict{{Passed: true}})
	require.False(t, missing.Passed)
}

func TestErrorContext(t *testing.T) {
	t.Parallel()
	many := make([]Failure, 40)
	for i := range many {
		many[i] = Failure{Name: fmt.Sprintf("TestCase%02d", i), Package: "example.com/p",
			Output: fmt.Sprintf("case %02d: ", i) + strings.Repeat("x", 1000) + "\nend of case\n"}
	}
	tests := []struct {
		name     string
		report   Verdict
		limit    int
		want     []string
		wantNot  []string
		wantFull string
	}{
		{name: "passed", report: Verdict{Passed: true, Output: "ok"}, limit: 100, wantFull: ""},
		{name: "one failure", limit: 500,
			report: Verdict{Format: FormatGoJSON, ExitCode: 1, Total: 3, Failed: 1,
				Failures: []Failure{{Name: "TestA", Package: "p", Output: "    a_test.go:9: got 1, want 2\n--- FAIL: TestA (0.00s)\n"}}},
			wantFull: "1 of 3 tests failed (go test, exit code 1)\n--- FAIL: TestA (p)\n    a_test.go:9: got 1, want 2"},
		{name: "many failures share the budget", limit: 3000, report: Verdict{Format: FormatGoJSON, ExitCode: 1, Total: 50, Failed: 40, Failures: many},
			want:    []string{"40 of 50 tests failed", "--- FAIL: TestCase00 (example.com/p)", "case 00: xxx", "end of case", "bytes elided", "… and ", "TestCase39"},
			wantNot: []string{"--- FAIL: TestCase39"}},
		{name: "no limit", limit: 0, report: Verdict{Format: FormatGoJSON, ExitCode: 1, Total: 50, Failed: 40, Failures: many},
			want: []string{"--- FAIL: TestCase39", strings.Repeat("x", 1000)}, wantNot: []string{"elided", "more"}},
		{name: "output when nothing was parsed", limit: 200,
			report: Verdict{Format: FormatExitCode, ExitCode: 2, Output: "head line\n" + strings.Repeat("noise\n", 100) + "the real error\n"},
			want:   []string{"exited with code 2", "head line", "the real error", "bytes elided"}},
		{name: "timeout and missing files", limit: 1000,
			report: Verdict{Format: FormatGoJSON, TimedOut: true, ExitCode: -1, Duration: 1500 * time.Millisecond, MissingFiles: []string{"a.go", "b.go"},
				Total: 1, Failed: 1, Failures: []Failure{{Name: "TestHang", Output: "(the test did not finish)\n"}}},
			wantFull: "the tests timed out after 1.5s and were killed\nmissing files (files_to_create, test_files): a.go, b.go\n1 of 1 tests failed (go test, exit code -1)\n--- FAIL: TestHang\n(the test did not finish)"},
		{name: "a package that did not build is no failed test", limit: 500,
			report: Verdict{Format: FormatGoJSON, ExitCode: 1, Total: 699, Failed: 1,
				Failures: []Failure{{Name: "[build failed]", Package: "p", Output: "p/a_test.go:9:6: TestDup redeclared in this block\n"}}},
			want: []string{"1 package did not build (go test, exit code 1)\n"}, wantNot: []string{"tests failed"}},
		{name: "tests and packages", limit: 500,
			report: Verdict{Format: FormatGoJSON, ExitCode: 1, Total: 12, Failed: 4, Failures: []Failure{{Name: "TestA", Package: "a"},
				{Name: "[setup failed]", Package: "b"}, {Name: "[build failed]", Package: "c"}, {Name: "[build failed]", Package: "d"}}},
			want: []string{"1 of 12 tests failed; 2 packages did not build; 1 package failed its setup (go test, exit code 1)\n"}},
		{name: "tiny limit", limit: 40, report: Verdict{Format: FormatGoJSON, ExitCode: 1, Total: 50, Failed: 40, Failures: many}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.report.ErrorContext(tt.limit)
			if tt.limit > 0 {
				require.LessOrEqual(t, len(got), tt.limit, "got %q", got)
			}
			require.True(t, utf8.ValidString(got))
			if tt.wantFull != "" || tt.report.Passed {
				require.Equal(t, tt.wantFull, got)
			}
			for _, s := range tt.want {
				require.Contains(t, got, s)
			}
			for _, s := range tt.wantNot {
				require.NotContains(t, got, s)
			}
			if !tt.report.Passed {
				require.NotEmpty(t, got)
			}
		})
	}
}

// A subtest's own name may hold "/": t.Run("a/b", …) in TestParse is
// TestParse/a/b, and there is no TestParse/a. Such names invented
// parents that never finished, and failed every passing suite.
func TestGoParserSubtestNamesWithSlashes(t *testing.T) {
	t.Parallel()
	events := []string{
		`{"Action":"run","Package":"p","Test":"TestParse"}`,
		`{"Action":"run","Package":"p","Test":"TestParse/a/b"}`,
		`{"Action":"run","Package":"p","Test":"TestParse/a/b/c_d"}`,
		`{"Action":"output","Package":"p","Test":"TestParse/a/b/c_d","Output":"    p_test.go:9: bad c d\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestParse/a/b/c_d"}`,
		`{"Action":"fail","Package":"p","Test":"TestParse/a/b"}`,
		`{"Action":"run","Package":"p","Test":"TestParse/x/y"}`,
		`{"Action":"pass","Package":"p","Test":"TestParse/x/y"}`,
		`{"Action":"fail","Package":"p","Test":"TestParse"}`,
		`{"Action":"fail","Package":"p"}`,
	}
	got, ok := parseGoTestJSON(strings.Join(events, "\n"))
	require.True(t, ok)
	checkCounts(t, got, 2, 1, 0, []wantFailure{{"TestParse/a/b/c_d", "p", []string{"bad c d"}}})

	// A package that passed has no unfinished tests, whatever the stream
	// lacks.
	got, _ = parseGoTestJSON(`{"Action":"run","Package":"q","Test":"TestA/b/c"}` + "\n" + `{"Action":"pass","Package":"q"}`)
	checkCounts(t, got, 1, 0, 0, nil)
}
