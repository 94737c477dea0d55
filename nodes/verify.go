package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskloom/taskloom/internal/proc"
)

// Report formats: how a TestReport's counts and failures were obtained.
const (
	FormatGoJSON        = "go-json"        // go test -json (test2json events)
	FormatPytestJUnit   = "pytest-junit"   // pytest --junitxml
	FormatPytestSummary = "pytest-summary" // pytest's console summary line
	FormatJestJSON      = "jest-json"      // jest --json or vitest --reporter=json
	FormatExitCode      = "exit-code"      // nothing parsable: the exit code decides
	FormatNone          = "none"           // no command to run
)

// DefaultVerifyTimeout bounds a verification when VerifyOpts.Timeout is 0.
const DefaultVerifyTimeout = 10 * time.Minute

// Size limits of what a report keeps. A report is stored with its attempt
// in every checkpoint, so it stays small; the full output is not kept.
const (
	reportOutputLimit   = 16 << 10 // TestReport.Output
	failureOutputLimit  = 4 << 10  // each TestFailure.Output
	maxReportedFailures = 30       // len(TestReport.Failures); Failed counts all
	commandOutputLimit  = 1 << 20  // CommandResult.Output
	maxLineLength       = 64 << 10 // a longer line is cut into pieces
)

// VerifyOpts configures how a task is verified. The zero value derives
// the command from the task's test files and uses DefaultVerifyTimeout.
type VerifyOpts struct {
	// Command is the argv of the test command, for example
	// ["go", "test", "./..."]. When it is empty the command is derived
	// from the task's test files (see Verify).
	Command []string
	// Timeout bounds the whole verification; 0 means DefaultVerifyTimeout.
	Timeout time.Duration
	// Env holds extra KEY=VALUE pairs added to the command's environment.
	Env []string
	// ConfineFunc confines the command in a worktree: its environment,
	// sandbox and redaction. nil reduces the environment to
	// proc.DefaultEnvAllow, without a sandbox.
	ConfineFunc func(dir string) (proc.Confinement, error)
}

// TestFailure is one failing test, or a failure that is not a test's, such
// as a package that does not compile.
type TestFailure struct {
	Name    string `json:"name"`
	Package string `json:"package,omitempty"`
	Output  string `json:"output"`
}

// TestReport is the outcome of a verification.
type TestReport struct {
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
	Failures []TestFailure `json:"failures,omitempty"`
	// Output is the combined output, trimmed to its head and tail. For
	// go test it is the text go test prints without -json.
	Output string `json:"output,omitempty"`
	// MissingFiles lists the files_to_create that do not exist.
	MissingFiles []string      `json:"missing_files,omitempty"`
	Duration     time.Duration `json:"duration"`
}

// CommandResult is the outcome of RunCommand.
type CommandResult struct {
	// ExitCode is the process's exit code, or -1 when a signal ended it.
	ExitCode int
	// Output is stdout and stderr interleaved line by line, trimmed to its
	// first and last 512 KiB.
	Output string
	// TimedOut reports that the timeout expired and the process group was
	// killed.
	TimedOut bool
	Duration time.Duration
}

// RunCommand runs argv in dir, confined as cf says (a zero cf reduces the
// environment to the default allowlist), and returns its exit code and
// combined output. When timeout (if > 0) expires everything the command
// started is killed, so test binaries and servers a test started die with
// it.
//
// A non-zero exit code and a timeout are results, not errors. The error is
// non-nil only when the command could not be started or ctx was done.
func RunCommand(ctx context.Context, dir string, argv []string, timeout time.Duration, cf proc.Confinement) (CommandResult, error) {
	return runCommand(ctx, dir, argv, timeout, cf, nil)
}

// runCommand is RunCommand with a callback that receives every complete
// line of output, in order, from one goroutine at a time.
func runCommand(ctx context.Context, dir string, argv []string, timeout time.Duration, cf proc.Confinement, onLine func(string)) (CommandResult, error) {
	if cf.Env == nil {
		cf.Env = proc.ReduceEnv(os.Environ(), proc.DefaultEnvAllow)
	}
	res, err := proc.Run(ctx, cf.Apply(proc.Cmd{Args: argv, Dir: dir, Timeout: timeout,
		OutputLimit: commandOutputLimit, OnLine: onLine}))
	out := CommandResult{ExitCode: res.ExitCode, Output: res.Output, TimedOut: res.TimedOut, Duration: res.Duration}
	if err != nil {
		return out, fmt.Errorf("run command: %w", err)
	}
	return out, nil
}

// confine returns how the verify command runs in dir.
func (o VerifyOpts) confine(dir string) (proc.Confinement, error) {
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

// headTail keeps the first and the last bytes written to it.
type headTail struct {
	headLimit, tailLimit int
	head, tail           []byte
	total                int
}

func newHeadTail(headLimit, tailLimit int) *headTail {
	return &headTail{headLimit: headLimit, tailLimit: tailLimit}
}

func (b *headTail) Write(p []byte) {
	b.total += len(p)
	if n := b.headLimit - len(b.head); n > 0 {
		k := min(n, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*b.tailLimit {
		b.tail = b.tail[:copy(b.tail, b.tail[len(b.tail)-b.tailLimit:])]
	}
}

func (b *headTail) WriteString(s string) { b.Write([]byte(s)) }

func (b *headTail) Len() int { return b.total }

func (b *headTail) String() string {
	tail := b.tail
	if len(tail) > b.tailLimit {
		tail = tail[len(tail)-b.tailLimit:]
	}
	return joinElided(b.head, tail, b.total)
}

// elisionMarker stands for n bytes left out of a text.
func elisionMarker(n int) string {
	return fmt.Sprintf("\n… %d bytes elided …\n", n)
}

// joinElided joins the head and the tail of a text of total bytes with a
// marker counting what lies between them. It moves the cuts to line
// boundaries when one is near, and never splits a UTF-8 sequence.
func joinElided(head, tail []byte, total int) string {
	if len(head)+len(tail) >= total {
		return string(head) + string(tail)
	}
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 && i >= len(head)*3/4 {
		head = head[:i+1]
	}
	if len(head) > 0 {
		if i := lastRuneStart(head); !utf8.FullRune(head[i:]) {
			head = head[:i]
		}
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/4 {
		tail = tail[i+1:]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return strings.TrimSuffix(string(head), "\n") + elisionMarker(total-len(head)-len(tail)) + string(tail)
}

// lastRuneStart returns the index of the first byte of b's last rune.
func lastRuneStart(b []byte) int {
	i := len(b) - 1
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}

// trimHeadTail shortens s to about limit bytes by cutting out its middle and
// putting "… N bytes elided …" in its place. limit <= 0 means no limit.
// The result is never longer than limit unless limit is shorter than the
// marker.
func trimHeadTail(s string, limit int) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	budget := limit - len(elisionMarker(len(s)))
	if budget <= 0 {
		return strings.TrimPrefix(elisionMarker(len(s)), "\n")
	}
	h := budget / 2
	return joinElided([]byte(s[:h]), []byte(s[len(s)-(budget-h):]), len(s))
}

// Verify checks that each file in filesToCreate exists in dir, then runs
// the tests in dir and parses their results. The report fails when a file
// is missing (it is listed in MissingFiles), when the command times out
// (the whole process group is killed) or exits non-zero, or when a test
// fails. The tests run even when files are missing, so a retry gets both.
//
// The command is opts.Command. When it is empty it is derived from
// testFiles: "go test" on the packages of the *_test.go files,
// "python3 -m pytest" on test_*.py and *_test.py files, and
// "npx --no vitest run" or "npx --no jest" (vitest when package.json or a
// vitest.config.* in dir mentions it) on *.test.* and *.spec.* JS/TS
// files. Several kinds run one after the other within the one timeout,
// and their reports are merged. With no command and no recognised test
// file nothing runs (Format "none"): the report passes if no file is
// missing.
//
// Verify rewrites the command to get machine-readable results:
//   - go test gets -json right after "test" unless it has it, and the
//     test2json stream is parsed (tests, subtests, compiler errors).
//   - pytest gets --junitxml=<temp file> unless it has --junitxml; the XML
//     is parsed, or the summary line when no XML was written.
//   - jest gets --json --outputFile=<temp file>, vitest gets
//     --reporter=default --reporter=json --outputFile=<temp file> (and
//     "run" unless a subcommand follows "vitest"), unless the command
//     names its own --outputFile, which is then read.
//
// Any other command is judged by its exit code, unless its output holds
// go test -json events or a pytest summary line, which are then parsed.
//
// The error is non-nil only when the tests could not be run at all: the
// command was not found, dir does not exist, or ctx was done.
func Verify(ctx context.Context, dir string, filesToCreate, testFiles []string, opts VerifyOpts) (TestReport, error) {
	start := time.Now()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultVerifyTimeout
	}
	rep := TestReport{Format: FormatNone, MissingFiles: missingFiles(dir, filesToCreate)}
	cmds := [][]string{opts.Command}
	if len(opts.Command) == 0 {
		cmds = deriveCommands(dir, testFiles)
	}
	var reps []TestReport
	for _, argv := range cmds {
		left := timeout - time.Since(start)
		if left <= 0 {
			reps = append(reps, TestReport{Format: FormatExitCode, ExitCode: -1, TimedOut: true,
				Output: "not run: the verification timeout had expired"})
			continue
		}
		cf, err := opts.confine(dir)
		if err != nil {
			return rep, fmt.Errorf("verify: %w", err)
		}
		r, err := runTests(ctx, dir, argv, left, cf)
		if err != nil {
			return rep, fmt.Errorf("verify: %w", err)
		}
		if len(cmds) > 1 {
			r.Output = "$ " + strings.Join(argv, " ") + "\n" + r.Output
		}
		reps = append(reps, r)
	}
	rep = mergeReports(rep, reps)
	rep.Duration = time.Since(start)
	return rep, nil
}

// missingFiles returns the files of names that do not exist in dir. A
// name that leads outside dir counts as missing.
func missingFiles(dir string, names []string) []string {
	var missing []string
	for _, name := range names {
		if name == "" {
			continue
		}
		rel := filepath.Clean(filepath.FromSlash(name))
		if !filepath.IsLocal(rel) {
			missing = append(missing, name)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

// mergeReports folds the reports of the commands into base.
func mergeReports(base TestReport, reps []TestReport) TestReport {
	passed := len(base.MissingFiles) == 0
	var formats, outputs []string
	for _, r := range reps {
		passed = passed && r.Passed
		if base.ExitCode == 0 {
			base.ExitCode = r.ExitCode
		}
		base.TimedOut = base.TimedOut || r.TimedOut
		base.Total += r.Total
		base.Failed += r.Failed
		base.Skipped += r.Skipped
		base.Failures = append(base.Failures, r.Failures...)
		formats = append(formats, r.Format)
		outputs = append(outputs, r.Output)
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

// testRunner is the kind of test command.
type testRunner int

const (
	runnerOther testRunner = iota
	runnerGo
	runnerPytest
	runnerJest
	runnerVitest
)

// detectRunner finds the test runner argv runs, and the index in argv
// where options for it go.
func detectRunner(argv []string) (testRunner, int) {
	if len(argv) >= 2 && progName(argv[0]) == "go" && argv[1] == "test" {
		return runnerGo, 2
	}
	for i, a := range argv {
		switch progName(a) {
		case "pytest", "py.test":
			return runnerPytest, i + 1
		case "jest":
			return runnerJest, i + 1
		case "vitest":
			return runnerVitest, i + 1
		}
		if a == "-m" && i+1 < len(argv) && argv[i+1] == "pytest" {
			return runnerPytest, i + 2
		}
	}
	return runnerOther, 0
}

// progName is the name of a program path without its directory and its
// script or executable extension.
func progName(arg string) string {
	base := path.Base(filepath.ToSlash(arg))
	for _, ext := range []string{".exe", ".js", ".mjs", ".cjs"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}

// insertArgs returns argv with args inserted at i, in a new slice.
func insertArgs(argv []string, i int, args ...string) []string {
	out := make([]string, 0, len(argv)+len(args))
	out = append(out, argv[:i]...)
	out = append(out, args...)
	return append(out, argv[i:]...)
}

// flagValue finds "--name=value" or "--name value" in argv.
func flagValue(argv []string, names ...string) (string, bool) {
	for i, a := range argv {
		if a == "--" {
			break
		}
		for _, name := range names {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v, true
			}
			if a == name && i+1 < len(argv) {
				return argv[i+1], true
			}
		}
	}
	return "", false
}

// withGoJSON adds -json to a go test command (at i, just after "test")
// unless it has it before -args.
func withGoJSON(argv []string, i int) []string {
	for _, a := range argv[i:] {
		if a == "-args" || a == "--args" {
			break
		}
		if a == "-json" || a == "--json" || a == "-json=true" || a == "--json=true" {
			return argv
		}
	}
	return insertArgs(argv, i, "-json")
}

// withReportFile adds the options that make a pytest, jest or vitest
// command write a report file under tmp. It returns the new argv and the
// report's path, which is the command's own when it names one.
func withReportFile(dir string, argv []string, kind testRunner, i int, tmp string) ([]string, string) {
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	switch kind {
	case runnerPytest:
		if p, ok := flagValue(argv, "--junitxml", "--junit-xml"); ok {
			return argv, resolve(p)
		}
		file := filepath.Join(tmp, "junit.xml")
		return insertArgs(argv, i, "--junitxml="+file), file
	case runnerJest:
		if p, ok := flagValue(argv, "--outputFile"); ok {
			return argv, resolve(p)
		}
		file := filepath.Join(tmp, "report.json")
		args := []string{"--outputFile=" + file}
		if !slices.Contains(argv, "--json") {
			args = append([]string{"--json"}, args...)
		}
		return insertArgs(argv, i, args...), file
	case runnerVitest:
		if i < len(argv) && slices.Contains([]string{"run", "watch", "dev", "related", "bench", "list"}, argv[i]) {
			i++
		} else {
			argv = insertArgs(argv, i, "run")
			i++
		}
		if p, ok := flagValue(argv, "--outputFile"); ok {
			return argv, resolve(p)
		}
		file := filepath.Join(tmp, "report.json")
		args := []string{"--reporter=json", "--outputFile=" + file}
		if _, ok := flagValue(argv, "--reporter"); !ok {
			args = append([]string{"--reporter=default"}, args...)
		}
		return insertArgs(argv, i, args...), file
	}
	return argv, ""
}

// prepareCommand rewrites a test command to get machine-readable
// results (see Verify), with report files in the directory tmp. It
// returns the new argv, the runner and the report file to read, if any.
func prepareCommand(dir string, argv []string, tmp string) ([]string, testRunner, string) {
	kind, at := detectRunner(argv)
	switch kind {
	case runnerGo:
		return withGoJSON(argv, at), kind, ""
	case runnerPytest, runnerJest, runnerVitest:
		argv, file := withReportFile(dir, argv, kind, at, tmp)
		return argv, kind, file
	}
	return argv, kind, ""
}

// deriveCommands makes the test commands for a task's test files.
func deriveCommands(dir string, testFiles []string) [][]string {
	var goPkgs, pyFiles, jsFiles []string
	for _, f := range testFiles {
		f = path.Clean(filepath.ToSlash(f))
		base := path.Base(f)
		switch {
		case strings.HasSuffix(base, "_test.go"):
			pkg := "./" + path.Dir(f)
			if path.Dir(f) == "." {
				pkg = "."
			}
			if !slices.Contains(goPkgs, pkg) {
				goPkgs = append(goPkgs, pkg)
			}
		case strings.HasSuffix(base, ".py") && (strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py")):
			pyFiles = append(pyFiles, f)
		case jsTestFile.MatchString(base):
			jsFiles = append(jsFiles, f)
		}
	}
	var cmds [][]string
	if len(goPkgs) > 0 {
		sort.Strings(goPkgs)
		cmds = append(cmds, append([]string{"go", "test"}, goPkgs...))
	}
	if len(pyFiles) > 0 {
		cmds = append(cmds, append([]string{"python3", "-m", "pytest"}, pyFiles...))
	}
	if len(jsFiles) > 0 {
		if usesVitest(dir) {
			cmds = append(cmds, append([]string{"npx", "--no", "vitest", "run"}, jsFiles...))
		} else {
			cmds = append(cmds, append([]string{"npx", "--no", "jest"}, jsFiles...))
		}
	}
	return cmds
}

var jsTestFile = regexp.MustCompile(`\.(test|spec)\.(js|jsx|ts|tsx|mjs|cjs|mts|cts)$`)

// usesVitest reports whether the JS project in dir uses vitest.
func usesVitest(dir string) bool {
	if m, _ := filepath.Glob(filepath.Join(dir, "vitest.config.*")); len(m) > 0 {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	return err == nil && bytes.Contains(b, []byte(`"vitest"`))
}

// runTests runs one test command and parses its results.
func runTests(ctx context.Context, dir string, argv []string, timeout time.Duration, cf proc.Confinement) (TestReport, error) {
	var tmp string
	if kind, _ := detectRunner(argv); kind != runnerGo && kind != runnerOther {
		var err error
		// The report file is written by the command, so it goes where the
		// sandbox lets it write.
		if tmp, err = os.MkdirTemp(cf.TempDir, "taskloom-verify-"); err != nil {
			return TestReport{}, fmt.Errorf("report dir: %w", err)
		}
		defer os.RemoveAll(tmp)
	}
	argv, kind, reportFile := prepareCommand(dir, argv, tmp)

	// Every command's output goes through the test2json parser: go test
	// needs it, and another command may print go test -json output too.
	gp := newGoTestParser()
	res, err := runCommand(ctx, dir, argv, timeout, cf, gp.line)
	if err != nil {
		return TestReport{}, err
	}
	rep := TestReport{ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: res.Duration,
		Format: FormatExitCode, Output: trimHeadTail(res.Output, reportOutputLimit)}

	var parsed testCounts
	var ok bool
	if reportFile != "" {
		if data, rerr := os.ReadFile(reportFile); rerr == nil && len(data) > 0 {
			switch kind {
			case runnerPytest:
				parsed, err = parsePytestJUnit(data)
				rep.Format = FormatPytestJUnit
			default:
				parsed, err = parseJestJSON(data, dir)
				rep.Format = FormatJestJSON
			}
			ok = err == nil
			if err != nil {
				rep.Output = trimHeadTail(fmt.Sprintf("%s\n(unreadable %s report: %v)", rep.Output, rep.Format, err), reportOutputLimit)
				rep.Format = FormatExitCode
			}
		}
	}
	if !ok && gp.events > 0 {
		parsed, ok = gp.finish(), true
		rep.Format = FormatGoJSON
		rep.Output = gp.text.String()
	}
	if !ok {
		if c, found := parsePytestSummary(res.Output); found {
			parsed, ok = c, true
			rep.Format = FormatPytestSummary
		}
	}
	rep.Total, rep.Failed, rep.Skipped, rep.Failures = parsed.total, parsed.failed, parsed.skipped, parsed.failures
	if len(rep.Failures) > maxReportedFailures {
		rep.Failures = rep.Failures[:maxReportedFailures]
	}
	for i := range rep.Failures {
		// Report files are read back outside the runner, which redacted
		// only what the command printed.
		f := &rep.Failures[i]
		f.Name, f.Output = cf.Redactor.Redact(f.Name), trimHeadTail(cf.Redactor.Redact(f.Output), failureOutputLimit)
	}
	rep.Output = cf.Redactor.Redact(rep.Output)
	rep.Passed = !rep.TimedOut && rep.ExitCode == 0 && rep.Failed == 0 && len(rep.Failures) == 0
	return rep, nil
}

// testCounts is what a parser gets out of a runner's report.
type testCounts struct {
	total, failed, skipped int
	failures               []TestFailure
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

func stripANSI(s string) string { return ansiEscape.ReplaceAllString(s, "") }

// ---- go test -json ----

// goEvent is a test2json event, or a build event of go test -json (Go
// 1.24+: build-output and build-fail, keyed by ImportPath).
type goEvent struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

type goTest struct {
	pkg, name string
	result    string // "", "pass", "fail" or "skip"
	hasSubs   bool
	failedSub bool
	out       *headTail // nil once the test passed or was skipped
}

type goPackage struct {
	name        string
	result      string
	failedBuild string
	out         *headTail
}

// goTestParser reads go test -json output line by line. Lines that are
// not events, such as the compiler errors older go versions print to
// stderr, are kept by the "# import/path" header they follow.
type goTestParser struct {
	events     int
	tests      map[[2]string]*goTest
	testOrder  []*goTest
	pkgs       map[string]*goPackage
	pkgOrder   []*goPackage
	build      map[string]*strings.Builder // ImportPath → build output
	stray      map[string]*strings.Builder // "# header" → plain lines
	strayOrder []string
	strayGroup string
	text       *headTail // what go test prints without -json
}

func newGoTestParser() *goTestParser {
	return &goTestParser{
		tests: map[[2]string]*goTest{},
		pkgs:  map[string]*goPackage{},
		build: map[string]*strings.Builder{},
		stray: map[string]*strings.Builder{},
		text:  newHeadTail(reportOutputLimit/4, reportOutputLimit*3/4),
	}
}

// parseGoTestJSON parses a whole go test -json output.
func parseGoTestJSON(out string) (testCounts, bool) {
	p := newGoTestParser()
	for l := range strings.Lines(out) {
		p.line(strings.TrimRight(l, "\r\n"))
	}
	if p.events == 0 {
		return testCounts{}, false
	}
	return p.finish(), true
}

func (p *goTestParser) line(l string) {
	if strings.HasPrefix(l, "{") {
		var ev goEvent
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Action != "" {
			p.events++
			p.event(ev)
			return
		}
	}
	p.text.WriteString(l + "\n")
	if h, ok := strings.CutPrefix(l, "# "); ok {
		if f := strings.Fields(h); len(f) > 0 {
			p.strayGroup = f[0]
		}
	}
	b := p.stray[p.strayGroup]
	if b == nil {
		b = &strings.Builder{}
		p.stray[p.strayGroup] = b
		p.strayOrder = append(p.strayOrder, p.strayGroup)
	}
	if b.Len() < failureOutputLimit*4 {
		b.WriteString(l + "\n")
	}
}

func (p *goTestParser) pkg(name string) *goPackage {
	pk := p.pkgs[name]
	if pk == nil {
		pk = &goPackage{name: name, out: newHeadTail(failureOutputLimit/2, failureOutputLimit/2)}
		p.pkgs[name] = pk
		p.pkgOrder = append(p.pkgOrder, pk)
	}
	return pk
}

func (p *goTestParser) test(pkg, name string) *goTest {
	k := [2]string{pkg, name}
	t := p.tests[k]
	if t == nil {
		t = &goTest{pkg: pkg, name: name, out: newHeadTail(failureOutputLimit/2, failureOutputLimit/2)}
		p.tests[k] = t
		p.testOrder = append(p.testOrder, t)
		p.pkg(pkg)
		for parent := name; ; {
			i := strings.LastIndexByte(parent, '/')
			if i < 0 {
				break
			}
			parent = parent[:i]
			p.test(pkg, parent).hasSubs = true
		}
	}
	return t
}

func (p *goTestParser) event(ev goEvent) {
	switch ev.Action {
	case "build-output":
		p.text.WriteString(ev.Output)
		b := p.build[ev.ImportPath]
		if b == nil {
			b = &strings.Builder{}
			p.build[ev.ImportPath] = b
		}
		if b.Len() < failureOutputLimit*4 {
			b.WriteString(ev.Output)
		}
		return
	case "build-fail":
		return
	}
	if ev.Test == "" {
		pk := p.pkg(ev.Package)
		switch ev.Action {
		case "output":
			p.text.WriteString(ev.Output)
			pk.out.WriteString(ev.Output)
		case "pass", "fail", "skip":
			pk.result, pk.failedBuild = ev.Action, ev.FailedBuild
		}
		return
	}
	t := p.test(ev.Package, ev.Test)
	switch ev.Action {
	case "output":
		p.text.WriteString(ev.Output)
		if t.out != nil && !isGoProgressLine(ev.Output) {
			t.out.WriteString(ev.Output)
		}
	case "pass", "skip":
		t.result, t.out = ev.Action, nil
	case "fail":
		t.result = "fail"
		for parent := t.name; ; {
			i := strings.LastIndexByte(parent, '/')
			if i < 0 {
				break
			}
			parent = parent[:i]
			p.test(t.pkg, parent).failedSub = true
		}
	}
}

// isGoProgressLine reports lines that only mark a test's progress.
func isGoProgressLine(l string) bool {
	for _, prefix := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// hasOwnOutput reports whether a test printed more than the lines that
// mark its progress and result: a parent test whose subtests failed is
// listed only if it failed for reasons of its own.
func hasOwnOutput(out string) bool {
	for l := range strings.Lines(out) {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "--- ") && !strings.HasPrefix(l, "=== ") {
			return true
		}
	}
	return false
}

// finish turns the events into counts and failures. Tests and subtests
// are counted as leaves; a test with no result when its package or the
// stream ended (a hang, a kill) is a failure. A failing package without
// failing tests (a build, setup or TestMain failure) is a failure named
// "[build failed]", "[setup failed]" or "[package failed]".
func (p *goTestParser) finish() testCounts {
	var c testCounts
	failedPkgs := map[string]int{}
	unfinishedSubs := map[[2]string]bool{}
	for _, t := range p.testOrder {
		if t.result != "" {
			continue
		}
		for parent := t.name; strings.Contains(parent, "/"); {
			parent = parent[:strings.LastIndexByte(parent, '/')]
			unfinishedSubs[[2]string{t.pkg, parent}] = true
		}
	}
	for _, t := range p.testOrder {
		switch {
		case t.result == "" && unfinishedSubs[[2]string{t.pkg, t.name}]:
			// Its unfinished subtest is reported.
		case t.result == "":
			c.total++
			c.failed++
			failedPkgs[t.pkg]++
			c.failures = append(c.failures, TestFailure{Name: t.name, Package: t.pkg,
				Output: t.out.String() + "(the test did not finish)\n"})
		case t.hasSubs && t.result == "fail":
			if !t.failedSub || hasOwnOutput(t.out.String()) {
				c.total++
				c.failed++
				failedPkgs[t.pkg]++
				c.failures = append(c.failures, TestFailure{Name: t.name, Package: t.pkg, Output: t.out.String()})
			}
		case t.hasSubs:
		default:
			c.total++
			switch t.result {
			case "fail":
				c.failed++
				failedPkgs[t.pkg]++
				c.failures = append(c.failures, TestFailure{Name: t.name, Package: t.pkg, Output: t.out.String()})
			case "skip":
				c.skipped++
			}
		}
	}
	reportedBuilds := map[string]string{}
	for _, pk := range p.pkgOrder {
		if failedPkgs[pk.name] > 0 || pk.result == "pass" || pk.result == "skip" {
			continue
		}
		out := pk.out.String()
		name := "[package failed]"
		switch {
		case strings.Contains(out, "[build failed]"):
			name = "[build failed]"
		case strings.Contains(out, "[setup failed]"):
			name = "[setup failed]"
		case pk.result == "" && pk.failedBuild == "":
			name = "[package did not finish]"
		}
		if pk.failedBuild != "" && name == "[package failed]" {
			name = "[build failed]"
		}
		if first, ok := reportedBuilds[pk.failedBuild]; ok && pk.failedBuild != "" {
			out = "(the same build failure as " + first + ")\n"
		} else if b := p.buildOutput(pk); b != "" {
			out = b + out
		}
		if pk.failedBuild != "" {
			reportedBuilds[pk.failedBuild] = pk.name
		}
		c.failed++
		c.failures = append(c.failures, TestFailure{Name: name, Package: pk.name, Output: out})
	}
	return c
}

// buildOutput finds the compiler output of a failed package: the
// build-output events of its FailedBuild, or of its own import path, or
// the plain lines under its "# import/path" header, or else all plain
// lines.
func (p *goTestParser) buildOutput(pk *goPackage) string {
	if b := p.build[pk.failedBuild]; pk.failedBuild != "" && b != nil {
		return b.String()
	}
	var keys []string
	for k := range p.build {
		if k == pk.name || strings.HasPrefix(k, pk.name+" ") {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		var sb strings.Builder
		for _, k := range keys {
			sb.WriteString(p.build[k].String())
		}
		return sb.String()
	}
	if b := p.stray[pk.name]; b != nil {
		return b.String()
	}
	if !strings.Contains(pk.out.String(), "failed]") && pk.result != "" {
		return ""
	}
	var sb strings.Builder
	for _, k := range p.strayOrder {
		sb.WriteString(p.stray[k].String())
	}
	return sb.String()
}

// ---- pytest ----

type junitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Failures  []junitResult `xml:"failure"`
	Errors    []junitResult `xml:"error"`
	Skipped   []junitResult `xml:"skipped"`
	SystemOut string        `xml:"system-out"`
	SystemErr string        `xml:"system-err"`
}

// junitSuite is a <testsuite>, or the <testsuites> root around them.
type junitSuite struct {
	Cases  []junitCase  `xml:"testcase"`
	Suites []junitSuite `xml:"testsuite"`
}

// parsePytestJUnit parses the JUnit XML of pytest --junitxml. A test
// case with a <failure> or an <error> (a collection or fixture error)
// fails; one with <skipped> (skip or xfail) is skipped.
func parsePytestJUnit(data []byte) (testCounts, error) {
	var root junitSuite
	if err := xml.Unmarshal(data, &root); err != nil {
		return testCounts{}, fmt.Errorf("parse junit xml: %w", err)
	}
	var c testCounts
	var walk func(s junitSuite)
	walk = func(s junitSuite) {
		for _, tc := range s.Cases {
			c.total++
			switch {
			case len(tc.Failures) > 0 || len(tc.Errors) > 0:
				c.failed++
				var b strings.Builder
				for _, f := range tc.Failures {
					writeJUnitResult(&b, "", f)
				}
				for _, e := range tc.Errors {
					writeJUnitResult(&b, "error: ", e)
				}
				if s := strings.TrimSpace(tc.SystemOut); s != "" {
					b.WriteString("--- captured stdout ---\n" + s + "\n")
				}
				if s := strings.TrimSpace(tc.SystemErr); s != "" {
					b.WriteString("--- captured stderr ---\n" + s + "\n")
				}
				c.failures = append(c.failures, TestFailure{Name: tc.Name, Package: tc.Classname, Output: b.String()})
			case len(tc.Skipped) > 0:
				c.skipped++
			}
		}
		for _, sub := range s.Suites {
			walk(sub)
		}
	}
	walk(root)
	return c, nil
}

func writeJUnitResult(b *strings.Builder, prefix string, r junitResult) {
	// The message is the short form of the traceback in the text; it is
	// kept only when it says something the text does not.
	text := strings.TrimSpace(r.Text)
	msg := strings.TrimSpace(r.Message)
	first, _, _ := strings.Cut(msg, "\n")
	if msg != "" && (text == "" || !strings.Contains(text, strings.TrimSpace(first))) {
		b.WriteString(prefix + msg + "\n")
	} else if prefix != "" {
		b.WriteString(strings.TrimSuffix(prefix, " ") + "\n")
	}
	if text != "" {
		b.WriteString(text + "\n")
	}
}

var (
	// pytestSummary matches "=== 2 failed, 3 passed in 0.12s ===" and the
	// -q form "2 failed, 3 passed in 0.12s".
	pytestSummary      = regexp.MustCompile(`^=*\s*(.+?) in (\d+(?:\.\d+)?)s(?: \([^)]*\))?\s*=*$`)
	pytestCount        = regexp.MustCompile(`^(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)$`)
	pytestSectionTitle = regexp.MustCompile(`^_{3,} (.+?) _{3,}$`)
	pytestShortLine    = regexp.MustCompile(`^(FAILED|ERROR) (\S+)(?: - (.*))?$`)
)

// parsePytestSummary parses pytest's console output: its last summary
// line for the counts, the "short test summary info" lines for the
// failures, and the tracebacks in the FAILURES and ERRORS sections for
// their output.
func parsePytestSummary(out string) (testCounts, bool) {
	lines := strings.Split(stripANSI(out), "\n")
	var c testCounts
	found := false
	for i := len(lines) - 1; i >= 0 && !found; i-- {
		m := pytestSummary.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		if m[1] == "no tests ran" {
			found = true
			break
		}
		counts := map[string]int{}
		ok := true
		for part := range strings.SplitSeq(m[1], ", ") {
			pm := pytestCount.FindStringSubmatch(part)
			if pm == nil {
				ok = false
				break
			}
			n, _ := strconv.Atoi(pm[1])
			counts[strings.TrimSuffix(pm[2], "s")] += n // "errors", "warnings"
		}
		if !ok {
			continue
		}
		found = true
		c.failed = counts["failed"] + counts["error"]
		c.skipped = counts["skipped"] + counts["xfailed"]
		c.total = counts["passed"] + c.failed + c.skipped + counts["xpassed"]
	}
	if !found {
		return testCounts{}, false
	}

	sections := map[string]string{}
	var title string
	var body strings.Builder
	endSection := func() {
		if title != "" {
			sections[title] = body.String()
		}
		title = ""
		body.Reset()
	}
	for _, l := range lines {
		if m := pytestSectionTitle.FindStringSubmatch(l); m != nil {
			endSection()
			title = m[1]
			continue
		}
		if strings.HasPrefix(l, "====") || strings.HasPrefix(l, "!!!!") {
			endSection()
			continue
		}
		if title != "" {
			body.WriteString(l + "\n")
		}
	}
	endSection()

	for _, l := range lines {
		m := pytestShortLine.FindStringSubmatch(strings.TrimRight(l, "\r"))
		if m == nil {
			continue
		}
		kind, nodeID, msg := m[1], m[2], m[3]
		file, name, _ := strings.Cut(nodeID, "::")
		if name == "" {
			name = file
		}
		out := ""
		for _, key := range pytestSectionKeys(kind, file, name) {
			if s, ok := sections[key]; ok {
				out = strings.Trim(s, "\n") + "\n"
				break
			}
		}
		if out == "" {
			out = msg + "\n"
		}
		c.failures = append(c.failures, TestFailure{Name: name, Package: file, Output: out})
	}
	return c, true
}

// pytestSectionKeys are the section titles pytest may have printed the
// traceback of a short summary line under.
func pytestSectionKeys(kind, file, name string) []string {
	dotted := strings.ReplaceAll(name, "::", ".")
	last := name[strings.LastIndex(name, "::")+1:]
	last = strings.TrimPrefix(last, ":")
	if kind == "FAILED" {
		return []string{dotted, last}
	}
	if name == file {
		return []string{"ERROR collecting " + file}
	}
	return []string{"ERROR at setup of " + dotted, "ERROR at setup of " + last,
		"ERROR at teardown of " + dotted, "ERROR at teardown of " + last}
}

// ---- jest and vitest ----

type jestReport struct {
	NumTotalTests   int `json:"numTotalTests"`
	NumFailedTests  int `json:"numFailedTests"`
	NumPendingTests int `json:"numPendingTests"`
	NumTodoTests    int `json:"numTodoTests"`
	TestResults     []struct {
		Name             string `json:"name"`
		Status           string `json:"status"`
		Message          string `json:"message"`
		AssertionResults []struct {
			AncestorTitles  []string `json:"ancestorTitles"`
			FullName        string   `json:"fullName"`
			Title           string   `json:"title"`
			Status          string   `json:"status"`
			FailureMessages []string `json:"failureMessages"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

// parseJestJSON parses the JSON report of jest --json or vitest
// --reporter=json (the same shape). A test file that failed to run (a
// syntax error, a missing module) has no assertion results; it counts as
// one failure named after the file. File names are made relative to dir.
func parseJestJSON(data []byte, dir string) (testCounts, error) {
	var r jestReport
	if err := json.Unmarshal(data, &r); err != nil {
		return testCounts{}, fmt.Errorf("parse jest json: %w", err)
	}
	c := testCounts{total: r.NumTotalTests, failed: r.NumFailedTests, skipped: r.NumPendingTests + r.NumTodoTests}
	for _, file := range r.TestResults {
		pkg := file.Name
		if rel, err := filepath.Rel(dir, file.Name); err == nil && filepath.IsLocal(rel) {
			pkg = filepath.ToSlash(rel)
		}
		failedHere := 0
		for _, a := range file.AssertionResults {
			if a.Status != "failed" {
				continue
			}
			failedHere++
			name := a.FullName
			if name == "" {
				name = strings.Join(append(slices.Clone(a.AncestorTitles), a.Title), " > ")
			}
			c.failures = append(c.failures, TestFailure{Name: name, Package: pkg,
				Output: stripANSI(strings.Join(a.FailureMessages, "\n")) + "\n"})
		}
		if failedHere == 0 && file.Status == "failed" {
			c.failed++
			c.failures = append(c.failures, TestFailure{Name: "[test file failed to run]", Package: pkg,
				Output: stripANSI(strings.TrimSpace(file.Message)) + "\n"})
		}
	}
	return c, nil
}

// ---- error context ----

// ErrorContext renders why the verification failed, as the error text a
// retry gets: the timeout, the missing files, the counts, and each
// failing test with its output trimmed. When there are more failures
// than fit, the last ones are listed by name. Without parsed failures it
// shows the command's output instead. The text is at most max bytes
// (max <= 0: no limit). It is "" for a report that passed.
func (r TestReport) ErrorContext(max int) string {
	return r.errorContext(max)
}

func (r TestReport) errorContext(limit int) string {
	if r.Passed {
		return ""
	}
	var b strings.Builder
	if r.TimedOut {
		fmt.Fprintf(&b, "the tests timed out after %s and were killed\n", r.Duration.Round(time.Millisecond))
	}
	if len(r.MissingFiles) > 0 {
		fmt.Fprintf(&b, "missing files (files_to_create): %s\n", strings.Join(r.MissingFiles, ", "))
	}
	switch {
	case r.Failed > 0 || len(r.Failures) > 0:
		failed := max(r.Failed, len(r.Failures))
		fmt.Fprintf(&b, "%d of %d tests failed (%s, exit code %d)\n", failed, max(r.Total, failed), r.Format, r.ExitCode)
	case r.ExitCode != 0 && !r.TimedOut:
		fmt.Fprintf(&b, "the test command exited with code %d (%s)\n", r.ExitCode, r.Format)
	}
	header := b.String()
	fit := func(s string) string {
		s = strings.TrimSuffix(s, "\n")
		if limit > 0 && len(s) > limit {
			s = trimHeadTail(s, limit)
		}
		return s
	}
	budget := limit - len(header) // meaningful only when limit > 0
	if limit > 0 && budget <= 0 {
		return fit(header)
	}

	if len(r.Failures) == 0 {
		const label = "output:\n"
		out := strings.TrimSpace(r.Output)
		if out == "" || limit > 0 && budget <= len(label)+len(elisionMarker(len(out))) {
			return fit(header)
		}
		return fit(header + label + trimHeadTail(out, budget-len(label)))
	}

	const minPerFailure = 300
	shown := len(r.Failures)
	rest := ""
	per := 0
	for ; limit > 0; shown-- {
		rest = restLine(r.Failures[shown:], budget/4)
		per = (budget - len(rest)) / shown
		if per >= minPerFailure || shown == 1 {
			break
		}
	}
	var body strings.Builder
	for _, f := range r.Failures[:shown] {
		title := "--- FAIL: " + f.Name
		if f.Package != "" {
			title += " (" + f.Package + ")"
		}
		title += "\n"
		out := strings.Trim(f.Output, "\n")
		if out != "" {
			out += "\n"
		}
		if limit > 0 {
			room := per - len(title)
			if room <= len(elisionMarker(len(out))) && len(out) > room {
				out = ""
			} else {
				out = trimHeadTail(out, room)
			}
		}
		body.WriteString(title + out)
	}
	return fit(header + body.String() + rest)
}

// restLine names the failures left out of an error context, in at most
// limit bytes (limit <= 0: no limit).
func restLine(rest []TestFailure, limit int) string {
	if len(rest) == 0 {
		return ""
	}
	names := make([]string, len(rest))
	for i, f := range rest {
		names[i] = f.Name
	}
	s := fmt.Sprintf("… and %d more: %s\n", len(rest), strings.Join(names, ", "))
	if limit > 0 && len(s) > limit {
		s = fmt.Sprintf("… and %d more\n", len(rest))
	}
	return s
}
