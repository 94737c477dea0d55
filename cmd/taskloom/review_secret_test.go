package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReviewNoteKeepsNoSecret: a key pasted into a review note is neither
// stored nor printed; the note keeps the rest of its words. (It sets an
// environment variable, so it does not run in parallel.)
func TestReviewNoteKeepsNoSecret(t *testing.T) {
	const secret = "tl-review-s3cret-0123456789"
	t.Setenv("TASKLOOM_TEST_REVIEW_SECRET", secret)
	repo, product := reviewSetup(t, 1, "")
	runID := reviewRun(t, repo, product)

	code, out, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo,
		"--task", "T1", "--action", "retry", "--note", "use the token "+secret+" for the API")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.NotContains(t, out+errOut, secret)
	decisions, _ := recordedDecisions(t, repo, "", runID)
	require.Len(t, decisions, 1)
	for _, d := range decisions {
		require.NotContains(t, d.Note, secret)
		require.Contains(t, d.Note, "use the token ")
		require.Contains(t, d.Note, " for the API")
	}
}

// TestStatusAfterEveryDecision: once a review decided every escalation,
// status says to resume, not to review again.
func TestStatusAfterEveryDecision(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 1, "")
	runID := reviewRun(t, repo, product)
	code, out, errOut := reviewCLI(t, strings.NewReader(""), "status", runID, "--repo", repo)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "next: review the escalations with taskloom review "+runID)
	// Paused, it works on nothing: no task is current.
	code, out, errOut = reviewCLI(t, strings.NewReader(""), "status", runID, "--repo", repo, "--json")
	require.Equal(t, exitOK, code, errOut)
	var st struct {
		Current []string `json:"current_task_ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Empty(t, st.Current)
	require.Contains(t, out, `"current_task_ids": []`)

	code, out, errOut = reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--task", "T1", "--action", "skip")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	code, out, errOut = reviewCLI(t, strings.NewReader(""), "status", runID, "--repo", repo)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "next: taskloom resume "+runID+" --repo "+repo+" (every escalation has a decision)\n")
	require.NotContains(t, out, "next: review")
}
