//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/planner"
)

// replanProduct is a task list in which T2 fails (its agent CLI exits 1
// on BROKEN) while T1 completes; T3 and T4 wait for T2.
const replanProduct = `# p

## Milestone M1: One

### Task T1: Write T1.txt
- acceptance_criteria: T1.txt exists
- files_to_create: T1.txt

### Task T2: Write T2.txt
- acceptance_criteria: T2.txt exists BROKEN
- files_to_create: T2.txt

### Task T3: Write T3.txt
- acceptance_criteria: T3.txt exists
- files_to_create: T3.txt
- dependencies: T2

### Task T4: Write T4.txt
- acceptance_criteria: T4.txt exists
- files_to_create: T4.txt
- dependencies: T2
`

// replanEdited changes T2 (no longer broken), drops T4 and adds T5 after
// the completed T1.
const replanEdited = `# p

## Milestone M1: One

### Task T1: Write T1.txt
- acceptance_criteria: T1.txt exists
- files_to_create: T1.txt

### Task T2: Write T2.txt
- acceptance_criteria: T2.txt exists and says which task wrote it
- files_to_create: T2.txt

### Task T3: Write T3.txt
- acceptance_criteria: T3.txt exists
- files_to_create: T3.txt
- dependencies: T2

### Task T5: Write T5.txt
- acceptance_criteria: T5.txt exists
- files_to_create: T5.txt
- dependencies: T1
`

// TestE2EReplan: a run paused for review with T1 completed is replanned
// with an edited PRODUCT.md and resumed. T1 is never redone (one trailer),
// the changed T2 and the new T5 are integrated, the removed T4 is skipped
// with its reason, and the run ends partial.
func TestE2EReplan(t *testing.T) {
	longE2E(t)
	forEachStore(t, testE2EReplan)
}

func testE2EReplan(t *testing.T, db []string) {
	dir := t.TempDir()
	agentScript := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(agentScript, []byte("#!/bin/sh\ncase \"$1\" in *BROKEN*) echo broken >&2; exit 1;; esac\necho \"done by $2\" > \"$2.txt\"\necho '{\"type\":\"result\",\"result\":\"done\"}'\n"), 0o755))
	cfg, err := json.Marshal(map[string]any{
		"parallel_workers":   2,
		"max_attempts":       1,
		"verify":             map[string]any{"command": []string{"true"}},
		"build_verification": map[string]any{"command": []string{"true"}},
		"worker":             map[string]any{"kind": "command", "command": []string{agentScript, "{prompt}", "{task_id}"}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"), cfg, 0o644))
	product := filepath.Join(dir, "PRODUCT.md")
	require.NoError(t, os.WriteFile(product, []byte(replanProduct), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "p")

	code, stdout, stderr := taskloom(t, append([]string{"run", product, "--repo", dir}, db...)...)
	require.Equal(t, 3, code, "paused for review\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	require.Equal(t, []string{"T1"}, sortedKeys(trailers(t, dir)))

	edited := filepath.Join(t.TempDir(), "PRODUCT.md")
	require.NoError(t, os.WriteFile(edited, []byte(replanEdited), 0o644))
	// Without --apply, nothing is recorded.
	code, stdout, stderr = taskloom(t, append([]string{"replan", id, edited, "--repo", dir, "--json"}, db...)...)
	require.Equal(t, 0, code, "replan --json\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	var dry struct {
		Applied bool                 `json:"applied"`
		Kept    []planner.ReplanTask `json:"kept"`
		Changed []planner.ReplanTask `json:"changed"`
		Added   []planner.ReplanTask `json:"added"`
		Removed []planner.ReplanTask `json:"removed"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &dry))
	require.False(t, dry.Applied)
	require.Equal(t, []string{"T1", "T3"}, replanIDs(dry.Kept))
	require.Equal(t, []string{"T2"}, replanIDs(dry.Changed))
	require.Equal(t, []string{"T5"}, replanIDs(dry.Added))
	require.Equal(t, []string{"T1"}, dry.Added[0].Dependencies)
	require.Equal(t, []string{"T4"}, replanIDs(dry.Removed))

	// The user edits the repo's own PRODUCT.md, which resume needs
	// committed: replan says so.
	require.NoError(t, os.WriteFile(product, []byte(replanEdited), 0o644))
	code, stdout, stderr = taskloom(t, append([]string{"replan", id, product, "--repo", dir, "--apply"}, db...)...)
	require.Equal(t, 0, code, "replan --apply\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, "; commit PRODUCT.md first (resume integrates into that checkout), then continue with: taskloom resume "+id)
	git(t, dir, "commit", "-q", "-am", "edit the product")
	require.Contains(t, stdout, "changed  T2       failed -> pending")
	require.Contains(t, stdout, "added    T5       pending")
	require.Contains(t, stdout, "removed  T4       blocked -> skipped")
	require.Contains(t, stdout, "kept     T3       blocked -> pending")
	require.Contains(t, stdout, "continue with: taskloom resume "+id)
	example := "$ taskloom replan " + id + " PRODUCT.md --apply\n" + stdout
	// history names the replan's checkpoint, for resume --from.
	code, hist, stderr := taskloom(t, append([]string{"history", id, "--repo", dir}, db...)...)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^\d+\s.*replan: 2 kept, 1 changed \(T2\), 1 added \(T5\), 1 removed \(T4\)`, hist)

	code, stdout, stderr = taskloom(t, append([]string{"resume", id, "--repo", dir}, db...)...)
	require.Equal(t, 5, code, "resume ends partial: T4 was removed\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, "  T4  skipped: "+planner.RemovedReason+"\n", "the summary says why T4 was skipped")
	if out := os.Getenv("TASKLOOM_REPLAN_EXAMPLE"); out != "" && len(db) == 0 {
		// The release note's example: the replan, then what resume did.
		example += "\n$ taskloom resume " + id + "   (exit 5: partial, T4 skipped)\n" + stdout +
			"\n$ git log --format=%(trailers:key=Taskloom-Task,valueonly) main\n" + git(t, dir, "log", "--format=%(trailers:key=Taskloom-Task,valueonly)", "main")
		require.NoError(t, os.WriteFile(out, []byte(example), 0o644))
	}
	tr := trailers(t, dir)
	require.Equal(t, []string{"T1", "T2", "T3", "T5"}, sortedKeys(tr))
	for task, attempts := range tr {
		require.Len(t, attempts, 1, "task %s integrated once", task)
	}
	s := openTestSession(t, dir, storeArgs2(db))
	g, err := s.Graph()
	require.NoError(t, err)
	res, err := g.State(context.Background(), id, -1)
	require.NoError(t, err)
	t4, _ := res.State.Tasks.Get("T4")
	require.Equal(t, planner.StatusSkipped, t4.Status)
	require.Equal(t, planner.RemovedReason, t4.Error)
	t5, _ := res.State.Tasks.Get("T5")
	require.Equal(t, planner.StatusCompleted, t5.Status)
	require.Equal(t, []string{"T1"}, t5.Dependencies)
	_, err = os.Stat(filepath.Join(dir, "T4.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "the removed task never ran")
}

func replanIDs(ts []planner.ReplanTask) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}
