package verify

import (
	"encoding/json"
	"sort"
	"strings"
)

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
	// parent is the test that ran this one, nil for a top-level test. A
	// subtest's own name may hold "/" (t.Run("a/b", …) in TestParse is
	// "TestParse/a/b"), so a parent is a test that ran, never a prefix
	// of the name.
	parent    *goTest
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
func parseGoTestJSON(out string) (counts, bool) {
	p := newGoTestParser()
	for l := range strings.Lines(out) {
		p.line(strings.TrimRight(l, "\r\n"))
	}
	if p.events == 0 {
		return counts{}, false
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
		t.parent = p.parentOf(pkg, name)
		if t.parent != nil {
			t.parent.hasSubs = true
		}
		p.tests[k] = t
		p.testOrder = append(p.testOrder, t)
		p.pkg(pkg)
	}
	return t
}

// parentOf finds the test that runs the subtest name: the longest prefix
// of name, cut at a "/", that is a test seen before (a parent's run event
// comes before its subtests').
func (p *goTestParser) parentOf(pkg, name string) *goTest {
	for i := strings.LastIndexByte(name, '/'); i > 0; i = strings.LastIndexByte(name[:i], '/') {
		if t := p.tests[[2]string{pkg, name[:i]}]; t != nil {
			return t
		}
	}
	return nil
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
		for a := t.parent; a != nil; a = a.parent {
			a.failedSub = true
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
// stream ended (a hang, a kill) is a failure, unless its package passed. A failing package without
// failing tests (a build, setup or TestMain failure) is a failure named
// "[build failed]", "[setup failed]" or "[package failed]".
func (p *goTestParser) finish() counts {
	var c counts
	failedPkgs := map[string]int{}
	unfinishedSubs := map[*goTest]bool{}
	for _, t := range p.testOrder {
		if t.result != "" {
			continue
		}
		if pk := p.pkgs[t.pkg]; pk != nil && pk.result == "pass" {
			// go test says the package passed: a missing result is the
			// stream's, not the test's.
			t.result = "pass"
			continue
		}
		for a := t.parent; a != nil; a = a.parent {
			unfinishedSubs[a] = true
		}
	}
	for _, t := range p.testOrder {
		switch {
		case t.result == "" && unfinishedSubs[t]:
			// Its unfinished subtest is reported.
		case t.result == "":
			c.total++
			c.failed++
			failedPkgs[t.pkg]++
			c.failures = append(c.failures, Failure{Name: t.name, Package: t.pkg,
				Output: t.out.String() + "(the test did not finish)\n"})
		case t.hasSubs && t.result == "fail":
			if !t.failedSub || hasOwnOutput(t.out.String()) {
				c.total++
				c.failed++
				failedPkgs[t.pkg]++
				c.failures = append(c.failures, Failure{Name: t.name, Package: t.pkg, Output: t.out.String()})
			}
		case t.hasSubs:
		default:
			c.total++
			switch t.result {
			case "fail":
				c.failed++
				failedPkgs[t.pkg]++
				c.failures = append(c.failures, Failure{Name: t.name, Package: t.pkg, Output: t.out.String()})
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
		c.failures = append(c.failures, Failure{Name: name, Package: pk.name, Output: out})
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
