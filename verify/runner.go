package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/safefile"
)

// runner is the test runner behind a command.
type runner int

const (
	runnerOther runner = iota
	runnerGo
	runnerPytest
	runnerJest
	runnerVitest
)

// format is the Format of a runner's machine-readable report.
func (r runner) format() string {
	switch r {
	case runnerGo:
		return FormatGoJSON
	case runnerPytest:
		return FormatPytestJUnit
	case runnerJest:
		return FormatJestJSON
	case runnerVitest:
		return FormatVitestJSON
	}
	return FormatExitCode
}

// detectRunner finds the test runner argv runs itself, and the index in
// argv where options for it go.
func detectRunner(argv []string) (runner, int) {
	if len(argv) >= 2 && progName(argv[0]) == "go" {
		// go -C DIR test runs in a module's folder.
		if argv[1] == "test" {
			return runnerGo, 2
		}
		if len(argv) >= 4 && argv[1] == "-C" && argv[3] == "test" {
			return runnerGo, 4
		}
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
	for _, ext := range []string{".exe", ".cmd", ".js", ".mjs", ".cjs"} {
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

// reportArgs returns the options that make a pytest, jest or vitest
// command write its report to file. have holds the command's own
// arguments after the runner; sub says whether they start with a vitest
// subcommand.
func reportArgs(kind runner, have []string, file string) []string {
	switch kind {
	case runnerPytest:
		return []string{"--junitxml=" + file, "-o", "junit_family=xunit1"}
	case runnerJest:
		args := []string{"--outputFile=" + file}
		if !slices.Contains(have, "--json") {
			args = append([]string{"--json"}, args...)
		}
		return args
	case runnerVitest:
		args := []string{"--reporter=json", "--outputFile=" + file}
		if _, ok := flagValue(have, "--reporter"); !ok {
			args = append([]string{"--reporter=default"}, args...)
		}
		return args
	}
	return nil
}

// ownReport returns the report file a command names itself.
func ownReport(kind runner, argv []string) (string, bool) {
	switch kind {
	case runnerPytest:
		return flagValue(argv, "--junitxml", "--junit-xml")
	case runnerJest, runnerVitest:
		return flagValue(argv, "--outputFile")
	}
	return "", false
}

var vitestSubcommands = []string{"run", "watch", "dev", "related", "bench", "list"}

// plan is a test command rewritten to get a machine-readable report.
type plan struct {
	argv []string
	// env is added to the command's environment.
	env  []string
	kind runner
	// report is the report file to read, if any.
	report string
}

// prepare rewrites a test command (see Run), with report files in the
// directory tmp. The caller's argv is not modified.
func prepare(dir string, argv []string, tmp string) plan {
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if p, ok := prepareWrapper(dir, argv, tmp); ok {
		return p
	}
	kind, at := detectRunner(argv)
	switch kind {
	case runnerGo:
		return plan{argv: withGoJSON(argv, at), kind: kind}
	case runnerPytest, runnerJest, runnerVitest:
		if execsPackage(argv[:at-1]) && !slices.Contains(argv[:at-1], "--") {
			// npx reads every option it knows (--json, --ci) as its own,
			// wherever it is, unless a "--" ends its options.
			argv = insertArgs(argv, at-1, "--")
			at++
		}
		if kind == runnerVitest {
			if at < len(argv) && slices.Contains(vitestSubcommands, argv[at]) {
				at++
			} else {
				argv = insertArgs(argv, at, "run")
				at++
			}
		}
		if p, ok := ownReport(kind, argv[at:]); ok {
			return plan{argv: argv, kind: kind, report: resolve(p)}
		}
		file := filepath.Join(tmp, reportName(kind))
		return plan{argv: insertArgs(argv, at, reportArgs(kind, argv[at:], file)...), kind: kind, report: file}
	}
	return pytestBehind(argv, runnerOther, tmp)
}

// pytestBehind is the plan of a command whose runner cannot be given
// options: a pytest somewhere behind it writes its report all the same,
// since pytest reads PYTEST_ADDOPTS wherever it is started from.
func pytestBehind(argv []string, kind runner, tmp string) plan {
	file := filepath.Join(tmp, reportName(runnerPytest))
	return plan{argv: argv, kind: kind, report: file,
		env: []string{"PYTEST_ADDOPTS=" + strings.Join(reportArgs(runnerPytest, nil, file), " ")}}
}

// execsPackage reports whether prefix, what comes before the runner in a
// command, is npx or npm exec.
func execsPackage(prefix []string) bool {
	if len(prefix) == 0 {
		return false
	}
	switch progName(prefix[0]) {
	case "npx":
		return true
	case "npm":
		return len(prefix) > 1 && (prefix[1] == "exec" || prefix[1] == "x")
	}
	return false
}

func reportName(kind runner) string {
	if kind == runnerPytest {
		return "junit.xml"
	}
	return "report.json"
}

// prepareWrapper rewrites npm, yarn and pnpm scripts and make targets for
// the runner behind them. ok is false when argv is no such wrapper.
func prepareWrapper(dir string, argv []string, tmp string) (plan, bool) {
	if len(argv) < 2 {
		return plan{}, false
	}
	prog := progName(argv[0])
	if prog == "make" || prog == "gmake" {
		return prepareMake(dir, argv, tmp), true
	}
	script, rest, ok := packageScript(prog, argv[1:])
	if !ok {
		return plan{}, false
	}
	body := readScript(dir, script)
	kind, last, own := scriptRunner(body)
	file := filepath.Join(tmp, reportName(kind))
	switch {
	case kind == runnerPytest:
		return pytestBehind(argv, kind, tmp), true
	case kind == runnerGo && !strings.Contains(body, "&&") && !strings.Contains(body, ";"):
		return plan{argv: argv, kind: kind, env: []string{"GOFLAGS=-json"}}, true
	case (kind == runnerJest || kind == runnerVitest) && last:
		// Options after the script name go to the script's last command.
		var extra []string
		if kind == runnerVitest && !slices.ContainsFunc(own, func(a string) bool { return slices.Contains(vitestSubcommands, a) }) {
			extra = append(extra, "--run")
		}
		extra = append(extra, reportArgs(kind, append(slices.Clone(own), rest...), file)...)
		out := slices.Clone(argv)
		if prog == "npm" && !slices.Contains(rest, "--") {
			out = append(out, "--")
		}
		return plan{argv: append(out, extra...), kind: kind, report: file}, true
	}
	return pytestBehind(argv, runnerOther, tmp), true
}

// packageScript finds the package.json script a package manager command
// runs: "npm test", "npm run test", "yarn test", "pnpm run test" and the
// like. rest is what follows the script's name.
func packageScript(prog string, args []string) (script string, rest []string, ok bool) {
	switch prog {
	case "npm", "yarn", "pnpm", "bun":
	default:
		return "", nil, false
	}
	if len(args) == 0 {
		return "", nil, false
	}
	switch args[0] {
	case "test", "t", "tst":
		return "test", args[1:], true
	case "run", "run-script", "rum", "urn":
		if len(args) > 1 {
			return args[1], args[2:], true
		}
	}
	return "", nil, false
}

// readScript returns a package.json script of dir.
func readScript(dir, name string) string {
	b, err := safefile.ReadTarget(filepath.Join(dir, "package.json"), maxReportBytes)
	if err != nil {
		return ""
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.Scripts[name]
}

var shellSeparators = regexp.MustCompile(`&&|\|\||[;|\n]`)

// scriptRunner finds the test runner a shell script runs: the last
// command that is one. last says whether that command ends the script
// (options appended to the script reach it); own holds its arguments
// after the runner.
func scriptRunner(script string) (kind runner, last bool, own []string) {
	parts := shellSeparators.Split(script, -1)
	for i := len(parts) - 1; i >= 0; i-- {
		fields := strings.Fields(parts[i])
		// Leading VAR=value assignments do not change the program.
		for len(fields) > 0 && strings.Contains(fields[0], "=") && !strings.HasPrefix(fields[0], "-") {
			fields = fields[1:]
		}
		k, at := detectRunner(fields)
		if k == runnerOther {
			continue
		}
		return k, i == len(parts)-1, fields[at:]
	}
	return runnerOther, false, nil
}

// prepareMake looks into a make target's recipe: a recipe that runs go
// test and no other go command gets GOFLAGS=-json, one that runs pytest
// gets PYTEST_ADDOPTS.
func prepareMake(dir string, argv []string, tmp string) plan {
	var target string
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
			target = a
			break
		}
	}
	recipe := makeRecipe(dir, target)
	goCmds := regexp.MustCompile(`(?:^|[\s;&|(])go\s+(\w+)`).FindAllStringSubmatch(recipe, -1)
	onlyTest := len(goCmds) > 0
	for _, m := range goCmds {
		onlyTest = onlyTest && m[1] == "test"
	}
	if onlyTest {
		return plan{argv: argv, kind: runnerGo, env: []string{"GOFLAGS=-json"}}
	}
	kind, _, _ := scriptRunner(recipe)
	if kind != runnerPytest {
		kind = runnerOther
	}
	return pytestBehind(argv, kind, tmp)
}

// makeRecipe returns the recipe lines of a target in dir's makefile
// ("" for the first target). Variables are not expanded.
func makeRecipe(dir, target string) string {
	var data []byte
	for _, name := range []string{"GNUmakefile", "makefile", "Makefile"} {
		if b, err := safefile.ReadTarget(filepath.Join(dir, name), maxReportBytes); err == nil {
			data = b
			break
		}
	}
	var b strings.Builder
	in := false
	for l := range strings.Lines(string(data)) {
		l = strings.TrimRight(l, "\r\n")
		if strings.HasPrefix(l, "\t") {
			if in {
				b.WriteString(strings.TrimLeft(l, "\t@-+") + "\n")
			}
			continue
		}
		name, _, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "#") || strings.Contains(l, ":=") || strings.HasPrefix(strings.TrimSpace(name), ".") {
			if strings.TrimSpace(l) != "" {
				in = false
			}
			continue
		}
		names := strings.Fields(name)
		in = (target == "" && b.Len() == 0 && len(names) > 0) || slices.Contains(names, target)
		if target == "" && b.Len() > 0 {
			in = false
		}
	}
	return b.String()
}

// deriveCommands makes the test commands for a task's test files, where
// the project shows how they run, so that a failing test of the task's
// own is its feedback before the whole suite runs: go test on the packages
// of *_test.go files, from the folder of their go.mod (with the -tags of
// a go test command); pytest on test_*.py and *_test.py files; vitest or
// jest on *.test.* and *.spec.* JS/TS files. Where the project's own test
// command runs pytest, jest or vitest, the task's files are run the same
// way ("pytest" from the PATH, say, where python3 has no pytest module).
// A file whose runner the project does not show (a Python project that
// tests with unittest, a JS one with node --test or mocha, a Go file in
// no module) gets no command of its own: the project's command runs it.
func deriveCommands(dir string, testFiles, command []string) [][]string {
	var pyFiles, jsFiles []string
	goPkgs := map[string][]string{} // by module folder
	for _, f := range testFiles {
		// A pytest node ID ("tests/test_a.py::test_b") runs as it is; its
		// file says which runner.
		file, node, _ := strings.Cut(filepath.ToSlash(f), "::")
		f = path.Clean(file)
		base := path.Base(f)
		if node != "" {
			if strings.HasSuffix(base, ".py") {
				pyFiles = append(pyFiles, f+"::"+node)
			}
			continue
		}
		switch {
		case strings.HasSuffix(base, "_test.go"):
			mod, ok := goModule(dir, path.Dir(f))
			if !ok {
				continue
			}
			rel := path.Dir(f)
			if mod != "." {
				rel = strings.TrimPrefix(strings.TrimPrefix(rel, mod), "/")
			}
			pkg := "./" + rel
			if rel == "" || rel == "." {
				pkg = "."
			}
			if !slices.Contains(goPkgs[mod], pkg) {
				goPkgs[mod] = append(goPkgs[mod], pkg)
			}
		case strings.HasSuffix(base, ".py") && (strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py")):
			pyFiles = append(pyFiles, f)
		case base == "conftest.py":
			pyFiles = append(pyFiles, "") // a pytest project: the files run with pytest
		case jsTestFile.MatchString(base):
			jsFiles = append(jsFiles, f)
		}
	}
	var cmds [][]string
	for _, mod := range slices.Sorted(maps.Keys(goPkgs)) {
		pkgs := goPkgs[mod]
		sort.Strings(pkgs)
		c := []string{"go", "test"}
		if mod != "." {
			c = []string{"go", "-C", mod, "test"}
		}
		cmds = append(cmds, slices.Concat(c, goTags(command), pkgs))
	}
	usesPytest := slices.Contains(pyFiles, "")
	pyFiles = slices.DeleteFunc(pyFiles, func(f string) bool { return f == "" })
	if len(pyFiles) > 0 {
		run := runnerOf(command, "pytest", "py.test")
		switch {
		case run != nil:
		case usesPytest || pytestProject(dir):
			run = []string{"python3", "-m", "pytest"}
		}
		if run != nil {
			cmds = append(cmds, append(run, pyFiles...))
		}
	}
	if len(jsFiles) > 0 {
		switch {
		case runnerOf(command, "vitest") != nil:
			cmds = append(cmds, slices.Concat(runnerOf(command, "vitest"), []string{"run"}, jsFiles))
		case runnerOf(command, "jest") != nil:
			cmds = append(cmds, append(runnerOf(command, "jest"), jsFiles...))
		case projectUses(dir, "vitest"):
			cmds = append(cmds, append([]string{"npx", "--no", "vitest", "run"}, jsFiles...))
		case projectUses(dir, "jest"):
			cmds = append(cmds, append([]string{"npx", "--no", "jest"}, jsFiles...))
		}
	}
	return cmds
}

// goModule returns the folder, relative to dir, of the Go module that
// holds the package folder pkg: the nearest with a go.mod, or dir itself
// when a go.work there names the modules. ok is false when there is none.
func goModule(dir, pkg string) (mod string, ok bool) {
	for d := pkg; ; d = path.Dir(d) {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(d), "go.mod")); err == nil && fi.Mode().IsRegular() {
			return d, true
		}
		if d == "." || d == "/" {
			break
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
		return ".", true
	}
	return "", false
}

// goTags returns the -tags of command when it runs go test, so that the
// task's packages build as the suite's do.
func goTags(command []string) []string {
	i := slices.Index(command, "test")
	if runnerOf(command, "go") == nil || i < 0 {
		return nil
	}
	for j := i + 1; j < len(command); j++ {
		switch w := command[j]; {
		case strings.HasPrefix(w, "-tags=") || strings.HasPrefix(w, "--tags="):
			return []string{w}
		case (w == "-tags" || w == "--tags") && j+1 < len(command):
			return []string{w, command[j+1]}
		}
	}
	return nil
}

// pytestProject reports whether the Python project in dir is set up for
// pytest: a pytest.ini or conftest.py, or pytest's section in
// pyproject.toml, setup.cfg or tox.ini.
func pytestProject(dir string) bool {
	for _, name := range []string{"pytest.ini", "conftest.py"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	for name, section := range map[string]string{"pyproject.toml": "[tool.pytest", "setup.cfg": "[tool:pytest]", "tox.ini": "[pytest]"} {
		if b, err := safefile.ReadTarget(filepath.Join(dir, name), maxReportBytes); err == nil && bytes.Contains(b, []byte(section)) {
			return true
		}
	}
	return false
}

// runnerOf returns the words of command that start one of the test
// runners named, up to the runner itself: ["pytest"] of "pytest -q",
// ["python3", "-m", "pytest"] of "python3 -m pytest tests", ["npx",
// "jest"] of "npx jest --ci". It is nil when command runs none of them
// directly (a script such as npm test or make test).
func runnerOf(command []string, names ...string) []string {
	for i, w := range command {
		base := strings.TrimSuffix(filepath.Base(w), ".exe")
		if slices.Contains(names, base) || slices.Contains(names, strings.TrimSuffix(base, ".js")) {
			return slices.Clone(command[:i+1])
		}
	}
	return nil
}

var jsTestFile = regexp.MustCompile(`\.(test|spec)\.(js|jsx|ts|tsx|mjs|cjs|mts|cts)$`)

// projectUses reports whether the JS project in dir uses the test runner
// name (jest or vitest): its config file, or its name in package.json.
func projectUses(dir, name string) bool {
	if m, _ := filepath.Glob(filepath.Join(dir, name+".config.*")); len(m) > 0 {
		return true
	}
	b, err := safefile.ReadTarget(filepath.Join(dir, "package.json"), maxReportBytes)
	return err == nil && bytes.Contains(b, []byte(`"`+name+`"`))
}

// runTests runs one test command and reads its results.
func runTests(ctx context.Context, dir string, argv []string, timeout time.Duration, cf proc.Confinement) (Verdict, error) {
	// Report files are written by the command, so they go where the
	// sandbox lets it write.
	tmp, err := os.MkdirTemp(cf.TempDir, "taskloom-verify-")
	if err != nil {
		return Verdict{}, fmt.Errorf("report dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	p := prepare(dir, argv, tmp)
	if p.report != "" && !strings.HasPrefix(p.report, tmp) {
		// The command's own report file: one left from before must not
		// be read as this run's.
		_ = os.Remove(p.report)
	}
	cf.Env = mergeEnv(cf.Env, p.env)

	// Every command's output goes through the test2json parser: go test
	// needs it, and another command may print go test -json output too.
	gp := newGoTestParser()
	res, err := proc.Run(ctx, cf.Apply(proc.Cmd{Args: p.argv, Dir: dir, Timeout: timeout,
		OutputLimit: commandOutputLimit, OnLine: gp.line}))
	if err != nil {
		// The runner's error names the program already.
		return Verdict{}, err
	}
	output := stripANSI(res.Output)
	if p.report != "" && strings.HasPrefix(p.report, tmp) {
		// The report file is taskloom's own, gone once read: a line that
		// names it ("generated xml file: …") means nothing to a retry.
		output = dropLines(output, tmp)
	}
	v := Verdict{ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: res.Duration,
		Format: FormatExitCode, Output: trimHeadTail(output, reportOutputLimit)}

	var parsed counts
	ok := false
	if p.report != "" {
		// The report sits where the tests can write: a pipe, a link or a
		// huge file put there is not read, and the exit code decides.
		if data, rerr := safefile.ReadFile(p.report, maxReportBytes); rerr == nil && len(data) > 0 {
			kind := p.kind
			if kind == runnerOther {
				kind = runnerPytest // only PYTEST_ADDOPTS writes a report then
			}
			switch kind {
			case runnerPytest:
				parsed, err = parsePytestJUnit(data)
			case runnerJest, runnerVitest:
				parsed, err = parseJestJSON(data, dir, output)
			}
			v.Format = kind.format()
			ok = err == nil
			if err != nil {
				v.Output = trimHeadTail(fmt.Sprintf("%s\n(unreadable %s report: %v)", v.Output, v.Format, err), reportOutputLimit)
				v.Format = FormatExitCode
			}
		}
	}
	if !ok && gp.events > 0 {
		parsed, ok = gp.finish(), true
		v.Format = FormatGoJSON
		v.Output = gp.text.String()
	}
	if !ok {
		if c, found := parsePytestSummary(output); found {
			parsed = c
			v.Format = FormatPytestSummary
		}
	}
	// The exit code is the verdict, but for one thing: a machine-readable
	// report (go test's stream, the JUnit or Jest file) that names failing
	// tests fails a command that exited 0, as after a TestMain that exits
	// 0 whatever m.Run said, or a script that ends in "|| true". What was
	// parsed never turns a failing exit into a pass, and a summary read
	// off the console, which a test's own output can imitate, decides
	// nothing.
	// A report asked for through PYTEST_ADDOPTS is written by whatever
	// pytest the command starts, a project's own fixture run among them:
	// only a report the runner was asked for by its arguments speaks for
	// the command.
	byEnv := slices.ContainsFunc(p.env, func(kv string) bool { return strings.HasPrefix(kv, "PYTEST_ADDOPTS=") })
	reported := ok && parsed.failed > 0 && !(byEnv && v.Format == FormatPytestJUnit)
	v.Passed = !v.TimedOut && v.ExitCode == 0 && !reported
	v.Total, v.Skipped = parsed.total, parsed.skipped
	if !v.Passed {
		v.Failed, v.Failures = parsed.failed, parsed.failures
	}
	if len(v.Failures) > maxReportedFailures {
		v.Failures = v.Failures[:maxReportedFailures]
	}
	for i := range v.Failures {
		// Report files are read back outside the runner, which redacted
		// only what the command printed.
		f := &v.Failures[i]
		f.Package = relPaths(f.Package, dir)
		f.Name = cf.Redactor.Redact(f.Name)
		f.Output = trimHeadTail(cf.Redactor.Redact(trimFrames(relPaths(f.Output, dir))), failureOutputLimit)
	}
	v.Output = cf.Redactor.Redact(relPaths(v.Output, dir))
	return v, nil
}

// mergeEnv adds extra to env. A variable both have gets both values,
// space-separated, so that the user's GOFLAGS or PYTEST_ADDOPTS stay.
func mergeEnv(env, extra []string) []string {
	out := slices.Clone(env)
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		if i < 0 {
			out = append(out, kv)
			continue
		}
		if old := strings.TrimPrefix(out[i], k+"="); old != "" {
			v = old + " " + v
		}
		out[i] = k + "=" + v
	}
	return out
}

// counts is what a parser gets out of a runner's report.
type counts struct {
	total, failed, skipped int
	failures               []Failure
}

// dropLines returns out without its lines that contain s.
func dropLines(out, s string) string {
	var b strings.Builder
	for l := range strings.Lines(out) {
		if !strings.Contains(l, s) {
			b.WriteString(l)
		}
	}
	return b.String()
}
