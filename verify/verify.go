package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/proc"
)

// Formats say how a Verdict's counts and failures were read.
const (
	FormatGoJSON        = "go-json"        // go test -json (test2json events)
	FormatPytestJUnit   = "pytest-junit"   // pytest --junitxml
	FormatPytestSummary = "pytest-summary" // pytest's console summary line
	FormatJestJSON      = "jest-json"      // jest --json
	FormatVitestJSON    = "vitest-json"    // vitest --reporter=json
	FormatExitCode      = "exit-code"      // nothing parsable: the exit code alone
	FormatNone          = "none"           // no command to run
)

// DefaultTimeout bounds a verification when Opts.Timeout is 0.
const DefaultTimeout = 10 * time.Minute

// Size limits of what a verdict keeps. A verdict is stored with its
// attempt in every checkpoint, so it stays small; the full output is not
// kept.
const (
	reportOutputLimit   = 16 << 10 // Verdict.Output
	maxReportBytes      = 64 << 20 // a report, package.json or Makefile read from the worktree
	failureOutputLimit  = 4 << 10  // each Failure.Output
	maxReportedFailures = 30       // len(Verdict.Failures); Failed counts all
	commandOutputLimit  = 1 << 20  // what is kept of a command's output
)

// Opts configures how commands run. nil means DefaultTimeout and the
// environment reduced to proc.DefaultEnvAllow, without a sandbox.
type Opts struct {
	// Timeout bounds the whole verification; 0 means DefaultTimeout.
	Timeout time.Duration
	// Env holds extra KEY=VALUE pairs added to the commands' environment.
	Env []string
	// ConfineFunc confines the commands run in a worktree: their
	// environment, sandbox and redaction.
	ConfineFunc func(dir string) (proc.Confinement, error)
}

// Spec says what to verify in a worktree.
type Spec struct {
	// Command is the argv of the test command, for example
	// ["go", "test", "./..."].
	Command []string
	// TestFiles are a task's own test files. Their tests run first, for
	// fast feedback, by a command derived from their names; Command runs
	// only when they pass.
	TestFiles []string
	// FilesToCreate must exist in the worktree.
	FilesToCreate []string
}

// Failure is one failing test, or a failure that is not a test's, such as
// a package that does not compile.
type Failure struct {
	// Name is the test's name as its runner names it: "TestParse/a/b",
	// "TestCart::test_total[a/b]", "cart > discount > applies".
	Name string `json:"name"`
	// Package is the Go package, or the test file relative to the
	// worktree.
	Package string `json:"package,omitempty"`
	Output  string `json:"output"`
}

// Verdict is the outcome of a verification.
type Verdict struct {
	// Passed is decided by the exit codes (and the files to create): the
	// parsed results only explain a failure.
	Passed   bool `json:"passed"`
	ExitCode int  `json:"exit_code"`
	TimedOut bool `json:"timed_out,omitempty"`
	// Format is one of the Format constants; a verification that ran
	// several commands joins their formats with "+".
	Format  string `json:"format"`
	Total   int    `json:"total"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
	// Failures holds at most 30 failures, each with its output trimmed to
	// 4 KiB; Failed counts them all.
	Failures []Failure `json:"failures,omitempty"`
	// Output is the combined output, trimmed to its head and tail, without
	// colour codes. For go test it is the text go test prints without
	// -json.
	Output string `json:"output,omitempty"`
	// MissingFiles lists the files to create and the test files that do
	// not exist. A test file that was never written runs no test, and a
	// runner such as go test passes on a package without tests.
	MissingFiles []string      `json:"missing_files,omitempty"`
	Duration     time.Duration `json:"duration"`
}

// Run verifies the worktree dir: it checks that spec's files to create
// exist, runs the tests of spec's test files, and, when they pass, spec's
// command. Each command's exit code decides whether it passed, but a
// report of failing tests fails a command that exited 0; a timeout
// kills everything it started and fails it. The tests run even when files
// are missing, so a retry learns both.
//
// Each command is rewritten to get its runner's machine-readable report,
// which names the failing tests and their output:
//   - go test gets -json and its test2json stream is parsed.
//   - pytest gets --junitxml (and -o junit_family=xunit1, for the file of
//     each test); the XML is parsed, or the console summary without one.
//   - jest gets --json --outputFile, vitest --reporter=json --outputFile
//     beside its console reporter (and "run", so it does not watch).
//   - npm test, npm run test, yarn test and pnpm test run the script in
//     package.json: when its last command is jest or vitest, those options
//     are passed through to it.
//   - make test gets GOFLAGS=-json when its recipe runs go test and no
//     other go command.
//   - Every other command gets PYTEST_ADDOPTS with --junitxml, so that a
//     pytest it runs writes its report all the same.
//
// The error is non-nil only when the tests could not be run at all: a
// command was not found, dir does not exist, or ctx ended.
func Run(ctx context.Context, dir string, spec Spec, opts *Opts) (Verdict, error) {
	if opts == nil {
		opts = &Opts{}
	}
	start := time.Now()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	base := Verdict{Format: FormatNone, MissingFiles: missingFiles(dir, slices.Concat(spec.FilesToCreate, spec.TestFiles))}
	scoped := deriveCommands(dir, spec.TestFiles, spec.Command)
	cmds := scoped
	if len(spec.Command) > 0 && !slices.ContainsFunc(scoped, func(c []string) bool { return slices.Equal(c, spec.Command) }) {
		cmds = append(cmds, spec.Command)
	}
	var vs []Verdict
	for i, argv := range cmds {
		if i == len(scoped) && len(vs) > 0 && !allPassed(vs) {
			break // the task's own tests failed: that is the feedback
		}
		left := timeout - time.Since(start)
		if left <= 0 {
			vs = append(vs, Verdict{Format: FormatExitCode, ExitCode: -1, TimedOut: true,
				Output: "not run: the verification timeout had expired"})
			continue
		}
		cf, err := opts.confine(dir)
		if err != nil {
			return base, fmt.Errorf("verify: %w", err)
		}
		v, err := runTests(ctx, dir, argv, left, cf)
		if err != nil {
			return base, fmt.Errorf("verify: %w", err)
		}
		if len(cmds) > 1 {
			v.Output = "$ " + strings.Join(argv, " ") + "\n" + v.Output
		}
		vs = append(vs, v)
	}
	v := merge(base, vs)
	v.Duration = time.Since(start)
	return v, nil
}

func allPassed(vs []Verdict) bool {
	for _, v := range vs {
		if !v.Passed {
			return false
		}
	}
	return true
}

// confine returns how a command runs in dir.
func (o *Opts) confine(dir string) (proc.Confinement, error) {
	cf := proc.Confinement{Env: proc.ReduceEnv(os.Environ(), proc.DefaultEnvAllow)}
	cf.Redactor = proc.NewRedactor(os.Environ(), proc.DefaultEnvAllow)
	if o.ConfineFunc != nil {
		var err error
		if cf, err = o.ConfineFunc(dir); err != nil {
			return cf, err
		}
	}
	cf.Env = append(cf.Env[:len(cf.Env):len(cf.Env)], o.Env...)
	return cf, nil
}

// missingFiles returns the files of names that do not exist in dir. A
// name that leads outside dir counts as missing.
func missingFiles(dir string, names []string) []string {
	var missing []string
	for _, name := range names {
		if name == "" || slices.Contains(missing, name) {
			continue
		}
		// A pytest node ID names its file before "::".
		file, _, _ := strings.Cut(name, "::")
		rel := filepath.Clean(filepath.FromSlash(file))
		if !filepath.IsLocal(rel) {
			missing = append(missing, name)
			continue
		}
		if strings.ContainsAny(rel, "*?[") {
			// A pattern names the files it matches: one is enough.
			if m, err := filepath.Glob(filepath.Join(dir, rel)); err == nil && len(m) > 0 {
				continue
			}
		}
		if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

// merge folds the verdicts of the commands into base. The commands run
// one after the other, each once those before it passed. A later command
// of the same runner (the suite) normally runs the earlier one's tests
// (the task's test files) again: of one runner's commands, Total and
// Skipped count the largest, not their sum, which would count those tests
// twice; different runners' tests add up.
func merge(base Verdict, vs []Verdict) Verdict {
	passed := len(base.MissingFiles) == 0
	var formats, outputs []string
	type counts struct{ total, skipped int }
	largest := map[string]counts{}
	for _, v := range vs {
		if c := largest[v.Format]; v.Total >= c.total {
			largest[v.Format] = counts{v.Total, v.Skipped}
		}
	}
	for _, c := range largest {
		base.Total += c.total
		base.Skipped += c.skipped
	}
	for _, v := range vs {
		passed = passed && v.Passed
		if base.ExitCode == 0 {
			base.ExitCode = v.ExitCode
		}
		base.TimedOut = base.TimedOut || v.TimedOut
		base.Failed += v.Failed
		base.Failures = append(base.Failures, v.Failures...)
		formats = append(formats, v.Format)
		outputs = append(outputs, v.Output)
	}
	if len(base.Failures) > maxReportedFailures {
		base.Failures = base.Failures[:maxReportedFailures]
	}
	if len(formats) > 0 {
		base.Format = strings.Join(formats, "+")
		base.Output = trimHeadTail(strings.Join(outputs, "\n"), reportOutputLimit)
	}
	base.Passed = passed
	return base
}
