package verify

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrorContext renders why the verification failed, as the error text a
// retry gets: the timeout, the missing files, the counts, and each
// failing test with its output trimmed. When there are more failures
// than fit, the last ones are listed by name. Without parsed failures it
// shows the command's output instead. The text is at most max bytes
// (max <= 0: no limit). It is "" for a verdict that passed.
func (r Verdict) ErrorContext(max int) string {
	return r.errorContext(max)
}

func (r Verdict) errorContext(limit int) string {
	if r.Passed {
		return ""
	}
	var b strings.Builder
	if r.TimedOut {
		fmt.Fprintf(&b, "the tests timed out after %s and were killed\n", r.Duration.Round(time.Millisecond))
	}
	if len(r.MissingFiles) > 0 {
		fmt.Fprintf(&b, "missing files (files_to_create, test_files): %s\n", strings.Join(r.MissingFiles, ", "))
	}
	switch {
	case (r.Failed > 0 || len(r.Failures) > 0) && r.ExitCode == 0 && !r.TimedOut:
		fmt.Fprintf(&b, "%s (%s), though the test command exited 0: a test that fails fails the task\n", r.failedCount(), r.Runner())
	case r.Failed > 0 || len(r.Failures) > 0:
		fmt.Fprintf(&b, "%s (%s, exit code %d)\n", r.failedCount(), r.Runner(), r.ExitCode)
	case r.ExitCode != 0 && !r.TimedOut && r.Runner() == "exit code":
		// Nothing but the exit code was read: naming it twice says nothing.
		fmt.Fprintf(&b, "the test command exited with code %d\n", r.ExitCode)
	case r.ExitCode != 0 && !r.TimedOut:
		fmt.Fprintf(&b, "the test command exited with code %d (%s)\n", r.ExitCode, r.Runner())
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
		out := strings.Trim(withoutOwnHeader(f.Output, f.Name), "\n")
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

// withoutOwnHeader drops from a failure's output the runner's own line
// for it ("--- FAIL: TestX (0.00s)"), which its title already says.
func withoutOwnHeader(out, name string) string {
	own := "--- FAIL: " + name + " ("
	var kept []string
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), own) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// restLine names the failures left out of an error context, in at most
// limit bytes (limit <= 0: no limit).
func restLine(rest []Failure, limit int) string {
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

// Runner names the runners whose reports the verdict was read from, by
// their own names ("go test", "pytest", "jest", "vitest"), each once,
// joined by "+"; "exit code" when no report was read.
func (r Verdict) Runner() string {
	var names []string
	for f := range strings.SplitSeq(r.Format, "+") {
		name := map[string]string{FormatGoJSON: "go test", FormatPytestJUnit: "pytest", FormatPytestSummary: "pytest",
			FormatJestJSON: "jest", FormatVitestJSON: "vitest", FormatExitCode: "exit code", FormatNone: "no command"}[f]
		if name == "" {
			name = f
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return strings.Join(names, "+")
}

// packageFailures names what a package-level failure (a Failure named
// "[build failed]" and so on, for a package whose tests did not all run)
// says of its package.
var packageFailures = []struct{ name, says string }{
	{"[build failed]", "did not build"},
	{"[setup failed]", "failed its setup"},
	{"[package did not finish]", "did not finish"},
	{"[package failed]", "failed outside its tests"},
}

// failedCount says how many tests failed, and apart from them how many
// packages failed to build, set up or finish: "1 of 1 tests failed" said
// of a compile error sends a retry looking for a test.
func (r Verdict) failedCount() string {
	failed := max(r.Failed, len(r.Failures))
	var parts []string
	pkgs := 0
	for _, pf := range packageFailures {
		n := 0
		for _, f := range r.Failures {
			if f.Name == pf.name {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s %s", n, plural(n, "package"), pf.says))
			pkgs += n
		}
	}
	if tests := failed - pkgs; tests > 0 || pkgs == 0 {
		// Total counts the tests that ran: a package's failure is none.
		parts = append([]string{fmt.Sprintf("%d of %d tests failed", tests, max(r.Total, tests))}, parts...)
	}
	return strings.Join(parts, "; ")
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
