package verify

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

type junitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitCase struct {
	Classname string `xml:"classname,attr"`
	Name      string `xml:"name,attr"`
	// File is set with junit_family=xunit1.
	File      string        `xml:"file,attr"`
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
func parsePytestJUnit(data []byte) (counts, error) {
	var root junitSuite
	if err := xml.Unmarshal(data, &root); err != nil {
		return counts{}, fmt.Errorf("parse junit xml: %w", err)
	}
	var c counts
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
				name, pkg := pytestName(tc)
				c.failures = append(c.failures, Failure{Name: name, Package: pkg, Output: b.String()})
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

// pytestName names a test case as pytest's node ID does, split into the
// file and the rest: "tests/test_cart.py" and "TestCart::test_total[a/b]".
// Without the file (junit_family=xunit2, pytest's default) it is the
// dotted class name and the test's name.
func pytestName(tc junitCase) (name, file string) {
	if tc.File == "" {
		return tc.Name, tc.Classname
	}
	module := strings.ReplaceAll(strings.TrimSuffix(tc.File, ".py"), "/", ".")
	if tc.Classname == "" {
		return tc.File, tc.File // the module itself: a collection error
	}
	classes, ok := strings.CutPrefix(tc.Classname, module)
	if !ok {
		return tc.Name, tc.File
	}
	classes = strings.TrimPrefix(classes, ".")
	if classes == "" {
		return tc.Name, tc.File
	}
	return strings.ReplaceAll(classes, ".", "::") + "::" + tc.Name, tc.File
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
func parsePytestSummary(out string) (counts, bool) {
	lines := strings.Split(stripANSI(out), "\n")
	var c counts
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
		return counts{}, false
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
		c.failures = append(c.failures, Failure{Name: name, Package: file, Output: out})
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
