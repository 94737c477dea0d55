package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store"
)

// reviewProduct lists tasks explicitly, so no model plans them; T1 goes
// first.
var reviewProduct = testkit.NotesProduct("high", "medium")

// reviewScript is the scripted model: T1's attempts write bad notes, which
// the verify command rejects, unless the prompt carries the reviewer's
// note; T2 writes bad content only when t2Fails.
func reviewScript(t *testing.T, t2Fails bool) string {
	t.Helper()
	write := func(path, content string) map[string]any {
		return map[string]any{"tool_calls": []map[string]any{{"name": "write_to_file", "arguments": map[string]string{"path": path, "content": content}}}}
	}
	done := map[string]any{"tool_calls": []map[string]any{{"name": "attempt_completion", "arguments": map[string]string{"result": "done"}}}}
	t2 := "good log\n"
	if t2Fails {
		t2 = "bad log\n"
	}
	script := map[string]any{"conversations": []map[string]any{
		{"match": `Task: T1\b[\s\S]*Reviewer note: ` + regexp.QuoteMeta(testkit.ReviewNote), "replies": []any{write("notes.txt", "good notes\n"), done}},
		{"match": `Task: T1\b`, "replies": []any{write("notes.txt", "bad notes\nline 2\nline 3\n"), done}},
		{"match": `Task: T2\b`, "replies": []any{write("log.txt", t2), done}},
	}}
	data, err := json.Marshal(script)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// reviewSetup makes a git repo whose run escalates: max_attempts 1 and a
// verify command that fails when a .txt file says "bad". With 2 workers T1
// and T2 run side by side and both escalate at once; with 1, T1 escalates
// and T2 passes. dbURL "" means the default SQLite store. It returns the
// repo and the PRODUCT.md.
func reviewSetup(t *testing.T, workers int, dbURL string) (repo, product string) {
	t.Helper()
	return notesRepo(t, map[string]any{
		"max_attempts":       1,
		"parallel_workers":   workers,
		"model":              "scripted:" + reviewScript(t, workers > 1),
		"verify":             map[string]any{"command": []string{"sh", "-c", "! cat *.txt 2>/dev/null | grep -q bad"}, "timeout": "1m"},
		"build_verification": map[string]any{"command": []string{}},
		"database":           map[string]any{"url": dbURL},
	}, reviewProduct)
}

// notesRepo makes a git repo with the config cfg and a PRODUCT.md (outside
// the repo) holding productText; it returns both.
func notesRepo(t *testing.T, cfg map[string]any, productText string) (repo, product string) {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(t, err)
	repo = testkit.Repo(t, map[string]string{".project-config.json": string(data), "README.md": "# notes\n"})
	product = filepath.Join(t.TempDir(), "PRODUCT.md")
	require.NoError(t, os.WriteFile(product, []byte(productText), 0o644))
	return repo, product
}

// fakeTerminal is a stdin that stands for a terminal.
type fakeTerminal struct{ io.Reader }

func (fakeTerminal) IsTerminal() bool { return true }

func reviewCLI(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(t.Context(), args, stdin, &out, &errOut)
	return code, out.String(), errOut.String()
}

var runIDPattern = regexp.MustCompile(`(?m)^run (r\S+)$`)

// reviewRun starts a run that stops for review and returns its ID.
func reviewRun(t *testing.T, repo, product string) string {
	t.Helper()
	code, out, errOut := reviewCLI(t, strings.NewReader(""), "run", product, "--repo", repo)
	require.Equal(t, exitReview, code, "run: stdout:\n%s\nstderr:\n%s", out, errOut)
	m := runIDPattern.FindStringSubmatch(out)
	require.NotNil(t, m, "no run ID in:\n%s", out)
	return m[1]
}

// reviewStore opens a repo's store (dbURL, else its SQLite store) until
// the test ends.
func reviewStore(t *testing.T, repo, dbURL string) store.Driver {
	t.Helper()
	if dbURL == "" {
		dbURL = session.DefaultDBURL(repo)
	}
	saver, err := session.OpenStore(t.Context(), dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = saver.Close() })
	return saver
}

// reviewState reads the newest checkpoint of a run.
func reviewState(t *testing.T, repo, dbURL, runID string) graph.Result[nodes.State] {
	t.Helper()
	saver := reviewStore(t, repo, dbURL)
	g, err := (&nodes.Runner{Pipeline: &nodes.Pipeline{}, Saver: saver}).Runnable()
	require.NoError(t, err)
	res, err := g.State(t.Context(), runID, -1)
	require.NoError(t, err)
	return res
}

// recordedDecisions reads the store's pending writes of a run: the
// decisions recorded for its escalated tasks, and the tasks still waiting
// for one.
func recordedDecisions(t *testing.T, repo, dbURL, runID string) (map[string]nodes.Decision, []string) {
	t.Helper()
	loaded, err := reviewStore(t, repo, dbURL).Load(t.Context(), runID, -1)
	require.NoError(t, err)
	taskOf := map[string]string{} // interrupt ID -> task ID
	var order []string
	answers := map[string]nodes.Decision{}
	for _, w := range loaded.Writes {
		switch w.Kind {
		case checkpoint.WriteInterrupt:
			var ints []graph.Interruption
			require.NoError(t, json.Unmarshal(w.Payload, &ints))
			for _, in := range ints {
				var p nodes.EscalationPayload
				require.NoError(t, in.Decode(&p))
				taskOf[in.ID] = p.TaskID
				order = append(order, in.ID)
			}
		case checkpoint.WriteResume:
			var d nodes.Decision
			require.NoError(t, json.Unmarshal(w.Payload, &d))
			answers[w.TaskID] = d
		}
	}
	decisions := map[string]nodes.Decision{}
	var pending []string
	for _, id := range order {
		if d, ok := answers[id]; ok {
			decisions[taskOf[id]] = d
		} else {
			pending = append(pending, taskOf[id])
		}
	}
	return decisions, pending
}

func taskStatus(t *testing.T, res graph.Result[nodes.State], id string) planner.Task {
	t.Helper()
	task, ok := res.State.Tasks.Get(id)
	require.True(t, ok, "task %s", id)
	return task
}

func TestReviewValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no run", []string{"review"}, exitUsage, "review needs a run ID"},
		{"bad action", []string{"review", "r1", "--action", "redo"}, exitUsage, `--action "redo": want fixed, retry, skip or abort`},
		{"note without action", []string{"review", "r1", "--note", "x"}, exitUsage, "--note goes with --action"},
		{"empty task", []string{"review", "r1", "--task", "", "--action", "skip"}, exitUsage, "want a task ID, or several"},
		{"empty task in a list", []string{"review", "r1", "--task", "T1,", "--action", "skip"}, exitUsage, "want a task ID, or several"},
		{"unknown flag", []string{"review", "r1", "--bogus"}, exitUsage, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := reviewCLI(t, strings.NewReader(""), tc.args...)
			require.Equal(t, tc.code, code, "stderr: %s", errOut)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
		})
	}
}

func TestReviewFlagsSkipThenResume(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			dbURL := ""
			if store == "postgres" {
				dbURL = checkpointtest.NewEmptyPostgresSchema(t)
			}
			repo, product := reviewSetup(t, 1, dbURL)
			runID := reviewRun(t, repo, product)

			// No terminal and no --action: the escalation is shown, exit 2.
			code, out, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo)
			require.Equal(t, exitUsage, code, "stderr: %s", errOut)
			require.Contains(t, out, "T1 — Write the notes file")
			require.Contains(t, out, "reason:   max attempts reached")
			require.Contains(t, out, "attempt:  1, the last (1 of max_attempts 1 failed, status failed)")
			require.Contains(t, out, "+bad notes")
			// The ref shown resolves, and the command shown gives the diff.
			ref := "refs/taskloom/attempts/" + runID + "/T1/1"
			require.Contains(t, out, "ref:      "+ref+"\n")
			require.Contains(t, out, "diff:     git -C "+repo+" show "+ref+"\n")
			require.Contains(t, git(t, repo, "show", ref), "+bad notes")
			require.Contains(t, errOut, "--task ID --action fixed|retry|skip|abort")

			code, _, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--task", "T9", "--action", "skip")
			require.Equal(t, exitError, code)
			require.Equal(t, "taskloom: task T9 has no pending escalation in run "+runID+" (pending: T1)\n", errOut)

			code, _, errOut = reviewCLI(t, strings.NewReader(""), "review", "r-missing", "--repo", repo, "--action", "skip")
			require.Equal(t, exitError, code)
			require.Contains(t, errOut, "run r-missing not found")

			// A note is for a retry's worker: with skip it is refused, as
			// a usage error, and nothing is recorded.
			code, _, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "skip", "--note", "x")
			require.Equal(t, exitUsage, code)
			require.Equal(t, "taskloom: a note goes with retry only\n", errOut)

			// Only T1 is escalated, so --task may be left out.
			code, out, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "skip")
			require.Equal(t, exitOK, code, "stderr: %s", errOut)
			require.Equal(t, "recorded for run "+runID+":\n  T1         skip\nnext: taskloom resume "+runID+" --repo "+repo+"\n", out)

			decisions, pending := recordedDecisions(t, repo, dbURL, runID)
			require.Equal(t, map[string]nodes.Decision{"T1": {Action: nodes.ActionSkip}}, decisions)
			require.Empty(t, pending)
			res := reviewState(t, repo, dbURL, runID)
			require.Empty(t, res.Interrupts, "the escalation is answered")
			require.Equal(t, graph.StatusPending, res.Status)
			require.Equal(t, planner.StatusFailed, taskStatus(t, res, "T1").Status, "review only records; resume acts")

			code, _, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "retry")
			require.Equal(t, exitError, code)
			require.Equal(t, "taskloom: run "+runID+" has no pending escalation: its review decisions are recorded; continue it with taskloom resume "+runID+" --repo "+repo+"\n", errOut)

			code, out, errOut = reviewCLI(t, strings.NewReader(""), "resume", runID, "--repo", repo)
			require.Equal(t, exitPartial, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			res = reviewState(t, repo, dbURL, runID)
			require.Equal(t, nodes.OutcomeCompleted, res.State.Outcome.Get())
			require.Equal(t, planner.StatusSkipped, taskStatus(t, res, "T1").Status)
			require.Equal(t, planner.StatusCompleted, taskStatus(t, res, "T2").Status)
			require.Empty(t, testkit.MainFile(t, repo, "notes.txt"), "a skipped task is not integrated")
			require.Empty(t, git(t, repo, "for-each-ref", "refs/taskloom/attempts/"+runID+"/"), "kept until the run ends, not after")

			code, _, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "skip")
			require.Equal(t, exitError, code)
			require.Equal(t, "taskloom: run "+runID+" is not waiting for a review (it is partial); nothing to decide\n", errOut)
		})
	}
}

func TestReviewFlagsRetryWithNoteAndResume(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 1, "")
	runID := reviewRun(t, repo, product)

	code, out, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo,
		"--task", "T1", "--action", "retry", "--note", testkit.ReviewNote, "--resume")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "  T1         retry (note: "+testkit.ReviewNote+")\n")
	require.Contains(t, out, "run "+runID+" (resumed)")

	res := reviewState(t, repo, "", runID)
	require.Equal(t, nodes.OutcomeCompleted, res.State.Outcome.Get())
	t1 := taskStatus(t, res, "T1")
	require.Equal(t, planner.StatusCompleted, t1.Status)
	require.Contains(t, t1.ImplementationNotes, "Reviewer note: "+testkit.ReviewNote)
	// Only the conversation that matches the note writes good notes.
	require.Equal(t, "good notes\n", testkit.MainFile(t, repo, "notes.txt"))
	// The retry's attempt goes on counting: attempt 2 everywhere, the
	// trailer included.
	a, ok := nodes.LastAttempt(res.State, "T1")
	require.True(t, ok)
	require.Equal(t, 2, a.Attempt)
	require.Contains(t, git(t, repo, "log", "--format=%B", "main"), "Taskloom-Task: "+runID+"/T1/2\n")
	require.Contains(t, strings.Join(logTexts(res.State), "\n"), "started T1 (attempt 2, 1 of max_attempts 1): ")
}

// logTexts returns the texts of a run's log.
func logTexts(s nodes.State) []string {
	var out []string
	for _, e := range s.Log.Items() {
		out = append(out, e.Text)
	}
	return out
}

func TestReviewFlagsTwoEscalations(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 2, "")
	runID := reviewRun(t, repo, product)

	code, _, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "skip")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "taskloom: run "+runID+" has 2 escalated tasks (T1, T2): pass --task ID for each decision\n", errOut)

	// Fixed by hand means committed on main: a fix that is not there
	// would fail the tasks after it.
	code, _, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--task", "T2", "--action", "fixed")
	require.Equal(t, exitError, code)
	require.Equal(t, "taskloom: T2 is not fixed on main yet: its last commit has none of log.txt; commit the fix on main, then mark it fixed\n", errOut)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "log.txt"), []byte("fixed by hand\n"), 0o644))
	testkit.Git(t, repo, "add", "log.txt")
	testkit.Git(t, repo, "commit", "-q", "-m", "fix T2 by hand")

	// A decision for one of two tasks is recorded; the run stays paused.
	code, out, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--task", "T2", "--action", "fixed")
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	require.Equal(t, "recorded for run "+runID+":\n  T2         fixed\nstill waiting for a decision: T1 (taskloom review "+runID+" --repo "+repo+")\n", out)
	decisions, pending := recordedDecisions(t, repo, "", runID)
	require.Equal(t, map[string]nodes.Decision{"T2": {Action: nodes.ActionFixed}}, decisions)
	require.Equal(t, []string{"T1"}, pending)

	code, out, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--task", "T1", "--action", "skip", "--resume")
	require.Equal(t, exitPartial, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	res := reviewState(t, repo, "", runID)
	require.Equal(t, nodes.OutcomeCompleted, res.State.Outcome.Get())
	require.Equal(t, planner.StatusSkipped, taskStatus(t, res, "T1").Status)
	require.Equal(t, planner.StatusCompleted, taskStatus(t, res, "T2").Status, "fixed by hand")
}

func TestReviewFlagsAbort(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 2, "")
	runID := reviewRun(t, repo, product)

	// With T2 still undecided, --resume does not resume.
	code, out, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--task", "T1", "--action", "skip", "--resume")
	require.Equal(t, exitReview, code, "stderr: %s", errOut)
	require.Equal(t, "recorded for run "+runID+":\n  T1         skip\nstill waiting for a decision: T2 (taskloom review "+runID+" --repo "+repo+")\n"+
		"not resuming: the run resumes once every escalated task has a decision\n", out)

	// abort needs no --task and answers every pending escalation.
	code, out, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "abort", "--resume")
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "recorded for run "+runID+":\n  T2         abort\nrun "+runID+" (resumed)")
	res := reviewState(t, repo, "", runID)
	require.Equal(t, nodes.OutcomeAborted, res.State.Outcome.Get())
}

func TestReviewInteractive(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 2, "")
	runID := reviewRun(t, repo, product)

	keys := strings.Join([]string{
		"x",                // not an action
		"r",                // retry T1
		testkit.ReviewNote, // its note
		"n",                // not confirmed: ask again
		"r",                // retry T1
		testkit.ReviewNote, // its note
		"y",                // confirmed
		"s",                // skip T2
		"",                 // confirmed by default
		"n",                // do not resume now
	}, "\n") + "\n"
	code, out, errOut := reviewCLI(t, fakeTerminal{strings.NewReader(keys)}, "review", runID, "--repo", repo)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for _, want := range []string{
		"run " + runID + " is paused for human review: 2 escalated task(s)\n",
		"== [1/2] T1 — Write the notes file\n",
		"== [2/2] T2 — Write the log file\n",
		"+bad notes",
		"+bad log",
		"T1: [f]ixed  [r]etry  [s]kip  [a]bort > type f, r, s or a (then Enter)\n",
		"note for the worker's next attempt (optional, Enter for none): ",
		`Retry T1 with the note "` + testkit.ReviewNote + `"? [Y/n] `,
		"Skip T2? [Y/n] ",
		"recorded for run " + runID + ":\n  T1         retry (note: " + testkit.ReviewNote + ")\n  T2         skip\n",
		"Resume now? [y/N] next: taskloom resume " + runID + " --repo " + repo + "\n",
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 3, strings.Count(out, "T1: [f]ixed  [r]etry  [s]kip  [a]bort"), "asked again after x and after the refused confirmation:\n%s", out)
	decisions, pending := recordedDecisions(t, repo, "", runID)
	require.Equal(t, map[string]nodes.Decision{
		"T1": {Action: nodes.ActionRetry, Note: testkit.ReviewNote},
		"T2": {Action: nodes.ActionSkip},
	}, decisions)
	require.Empty(t, pending)

	code, out, errOut = reviewCLI(t, strings.NewReader(""), "resume", runID, "--repo", repo)
	require.Equal(t, exitPartial, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	res := reviewState(t, repo, "", runID)
	require.Equal(t, planner.StatusCompleted, taskStatus(t, res, "T1").Status)
	require.Equal(t, planner.StatusSkipped, taskStatus(t, res, "T2").Status)
	require.Equal(t, "good notes\n", testkit.MainFile(t, repo, "notes.txt"))
}

func TestReviewInteractiveAbortAndResumeNow(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 2, "")
	runID := reviewRun(t, repo, product)

	keys := "a\n\na\ny\ny\n" // abort, refused by default, abort, confirmed, resume now
	code, out, errOut := reviewCLI(t, fakeTerminal{strings.NewReader(keys)}, "review", runID, "--repo", repo)
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, 2, strings.Count(out, "Abort the whole run? Every escalated task is answered with abort. [y/N] "))
	require.NotContains(t, out, "[2/2]", "abort ends the review")
	require.Contains(t, out, "  T1         abort\n  T2         abort\n")
	require.Contains(t, out, "Resume now? [y/N] run "+runID+" (resumed)")
	require.Equal(t, nodes.OutcomeAborted, reviewState(t, repo, "", runID).State.Outcome.Get())
}

func TestReviewInteractiveInputEnds(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 2, "")
	runID := reviewRun(t, repo, product)

	code, out, errOut := reviewCLI(t, fakeTerminal{strings.NewReader("f\ny\n")}, "review", runID, "--repo", repo)
	require.Equal(t, exitError, code, "stdout:\n%s", out)
	require.Equal(t, "taskloom: review cancelled before all decisions were taken; nothing was recorded\n", errOut)
	decisions, pending := recordedDecisions(t, repo, "", runID)
	require.Empty(t, decisions, "nothing recorded")
	require.Equal(t, []string{"T1", "T2"}, pending)
}

func TestReviewBusyRun(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 1, "")
	runID := reviewRun(t, repo, product)

	saver := reviewStore(t, repo, "")
	lease, err := saver.Acquire(t.Context(), runID, "pid 4242, host elsewhere", time.Now(), time.Minute)
	require.NoError(t, err)

	code, _, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "skip")
	require.Equal(t, exitError, code)
	require.Equal(t, "taskloom: run "+runID+" is being driven by another process (pid 4242, host elsewhere); wait for it to finish or stop it\n", errOut)
	_, pending := recordedDecisions(t, repo, "", runID)
	require.Equal(t, []string{"T1"}, pending, "nothing recorded")

	require.NoError(t, saver.Release(t.Context(), lease))
	code, _, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "skip")
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
}
