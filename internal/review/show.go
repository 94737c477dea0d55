package review

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/verify"
)

// Limits of what the review shows of each text before cutting it.
const (
	reviewErrorLines = 20
	reviewDiffLines  = 30
	reviewTestLines  = 25
	reviewPageLines  = 40
)

// reasonText words an escalation reason for a person.
func reasonText(reason string) string {
	switch reason {
	case nodes.ReasonMaxAttempts:
		return "max attempts reached"
	case nodes.ReasonDeadlock:
		return "deadlock: no task can start"
	case nodes.ReasonCycle:
		return "dependency cycle"
	case nodes.ReasonConflict:
		return "merge conflict that persists after retries"
	case nodes.ReasonQuestion:
		return "the worker has a question"
	case nodes.ReasonBuild:
		return "build verification on main failed"
	}
	return reason
}

// TestSummary sums up a verification in one line, for the terminal and
// the web page alike: passed, timed out or how many failed; the runner
// whose report was read, when there was one; the exit code; and the files
// to create that are missing.
func TestSummary(v verify.Verdict) string {
	var parts []string
	switch {
	case v.Passed:
		parts = append(parts, "passed")
	case v.TimedOut:
		parts = append(parts, "timed out after "+v.Duration.Round(time.Millisecond).String())
	case v.Failed > 0:
		parts = append(parts, fmt.Sprintf("%d of %d failed", v.Failed, max(v.Total, v.Failed)))
	default:
		parts = append(parts, "failed")
	}
	if r := v.Runner(); r != "" && r != "exit code" {
		parts = append(parts, r)
	}
	if !v.TimedOut {
		// A killed command has no exit code of its own.
		parts = append(parts, fmt.Sprintf("exit code %d", v.ExitCode))
	}
	if len(v.MissingFiles) > 0 {
		parts = append(parts, "missing "+strings.Join(v.MissingFiles, ", "))
	}
	return strings.Join(parts, ", ")
}

// showCommand is the command that shows ref's whole diff in repo: git -C
// REPO show REF, or git show REF when the repo is not known.
func showCommand(repo, ref string) string {
	if repo == "" {
		return "git show " + ref
	}
	return fmt.Sprintf("git -C %s show %s", ShellQuote(repo), ref)
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '\\' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// section is a titled text of an escalation's view.
type section struct {
	title string
	text  string
	limit int
}

func (e Escalation) sections() []section {
	var out []section
	if e.payload.Error != "" {
		title := "error"
		if e.payload.Reason == nodes.ReasonQuestion {
			title = "question"
		}
		out = append(out, section{title: title, text: e.payload.Error, limit: reviewErrorLines})
	}
	a := e.attempt
	if a == nil {
		return out
	}
	if len(a.Conflicts) > 0 {
		out = append(out, section{title: "conflicting files", text: strings.Join(a.Conflicts, "\n"), limit: reviewErrorLines})
	}
	switch {
	case a.Diff != "":
		out = append(out, section{title: fmt.Sprintf("diff of attempt %d", a.Attempt), text: a.Diff, limit: reviewDiffLines})
	case a.Changed:
		// Changed, but its diff was not kept (an older run's question, say).
		text := "(the attempt changed files; its diff was not kept)"
		if e.payload.Ref != "" {
			text = "(the attempt changed files; git show " + e.payload.Ref + " shows them)"
		}
		out = append(out, section{title: fmt.Sprintf("diff of attempt %d", a.Attempt), text: text, limit: 1})
	case a.Commit != "" || a.Worktree != "":
		out = append(out, section{title: fmt.Sprintf("diff of attempt %d", a.Attempt), text: "(the attempt changed nothing)", limit: 1})
	}
	// The error usually quotes the test output already; show it only when
	// it adds something.
	if a.Tests != nil {
		text := strings.TrimSpace(a.Tests.Output)
		if text != "" && !strings.Contains(e.payload.Error, text) {
			out = append(out, section{title: "test output", text: text, limit: reviewTestLines})
		}
	}
	return out
}

// Show prints the Escalations; full prints their texts uncut.
func (rv *Review) Show(w io.Writer, escs []Escalation, full bool) {
	fmt.Fprintf(w, "run %s is paused for human review: %d escalated task(s)\n", rv.runID, len(rv.pending))
	for i, e := range escs {
		fmt.Fprintln(w)
		rv.showOne(w, e, i, len(escs), full)
	}
}

// showOne prints one Escalation and reports whether a text was cut.
func (rv *Review) showOne(w io.Writer, e Escalation, i, n int, full bool) bool {
	title := e.payload.Title
	if title == "" {
		title = e.task.Title
	}
	fmt.Fprintf(w, "== [%d/%d] %s — %s\n", i+1, n, e.payload.TaskID, title)
	fmt.Fprintf(w, "reason:   %s\n", reasonText(e.payload.Reason))
	// The attempt number counts every attempt; max_attempts bounds the
	// failed ones since the last review.
	var used []string
	if e.task.MaxAttempts > 0 {
		used = append(used, fmt.Sprintf("%d of max_attempts %d failed", e.payload.Attempts, e.task.MaxAttempts))
	}
	if e.task.Status != "" {
		used = append(used, "status "+string(e.task.Status))
	}
	about := ""
	if len(used) > 0 {
		about = " (" + strings.Join(used, ", ") + ")"
	}
	if a := e.attempt; a != nil {
		fmt.Fprintf(w, "attempt:  %d, the last%s\n", a.Attempt, about)
		if e.payload.Ref != "" {
			fmt.Fprintf(w, "ref:      %s\n", e.payload.Ref)
			fmt.Fprintf(w, "diff:     %s\n", showCommand(rv.repo, e.payload.Ref))
		}
	} else {
		fmt.Fprintf(w, "attempt:  none yet%s\n", about)
	}
	if e.attempt != nil && e.attempt.Tests != nil {
		fmt.Fprintf(w, "tests:    %s\n", TestSummary(*e.attempt.Tests))
	}
	cut := false
	for _, s := range e.sections() {
		fmt.Fprintf(w, "%s:\n", s.title)
		lines := strings.Split(strings.TrimRight(s.text, "\n"), "\n")
		shown := lines
		if !full && len(lines) > s.limit {
			shown = lines[:s.limit]
		}
		for _, l := range shown {
			fmt.Fprintf(w, "  │ %s\n", l)
		}
		if len(shown) < len(lines) {
			cut = true
			fmt.Fprintf(w, "  … %d more line(s) cut\n", len(lines)-len(shown))
		}
	}
	return cut
}
