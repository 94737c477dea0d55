//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/store/storetest"
)

// TestForkAfterADamagedCheckpoint follows the way on that a damaged
// checkpoint's error names: a fork of the checkpoint before it. The run
// was killed right after it integrated a task, so the damaged checkpoint
// is the one that would have recorded that. The fork completes that task
// with the commit already on main, rather than fail its try for a
// worktree it does not have, redo it as "no change", or integrate it
// twice; and the tries the source had in flight are dropped, costing no
// attempt.
func TestForkAfterADamagedCheckpoint(t *testing.T) {
	bin, ref := killSetup(t)
	dir, runID := killCrashDemo(t, bin, "", "integrate:after")
	head := damageHead(t, filepath.Join(dir, ".taskloom", "taskloom.db"), runID)

	res := killExec(t, bin, dir, "", killResumeArgs(runID, dir, "")...)
	require.Equal(t, exitError, res.Code, "resume of the damaged run: %s", res)
	m := regexp.MustCompile(`taskloom resume ` + runID + ` --from (\d+)`).FindStringSubmatch(res.Stderr)
	require.NotNil(t, m, "the error names the way on: %s", res)
	from := m[1]
	require.Equal(t, fmt.Sprint(head-1), from)
	forked := regexp.MustCompile(`run (\S+) \(forked from ` + runID + ` at checkpoint ` + from + `\)`)

	res = killExec(t, bin, dir, "", killResumeArgs(runID, dir, "", "--from", from)...)
	require.Equal(t, exitOK, res.Code, "the fork: %s", res)
	m = forked.FindStringSubmatch(res.Stdout)
	require.NotNil(t, m, "the fork says what it is: %s", res)
	fork := m[1]
	require.NotEqual(t, runID, fork)

	res = killExec(t, bin, dir, "", "status", fork, "--repo", dir, "--json")
	require.Equal(t, exitOK, res.Code, "status: %s", res)
	var st struct {
		Status   string   `json:"status"`
		NoChange []string `json:"no_change"`
		Tasks    struct {
			Completed int `json:"completed"`
		} `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &st))
	require.Equal(t, "completed", st.Status)
	require.Equal(t, len(killTasks), st.Tasks.Completed)
	require.Empty(t, st.NoChange, "a task integrated by the source is not 'no change' in the fork")
	require.Equal(t, ref.Tree, killGit(t, dir, "ls-tree", "-r", "main"), "main's tree differs from the uninterrupted run's")

	// Each task once on main: the first by the source, the rest by the
	// fork.
	onceEach(t, dir, runID, fork)
	require.Equal(t, ref.Packages, killGoTest(t, dir), "packages tested on main")

	// The damaged run still names the same way on; taken again, the
	// second fork finds the first fork's work on main too, and redoes
	// none of it.
	res = killExec(t, bin, dir, "", killResumeArgs(runID, dir, "", "--from", from)...)
	require.Equal(t, exitOK, res.Code, "the second fork: %s", res)
	m = forked.FindStringSubmatch(res.Stdout)
	require.NotNil(t, m, "the second fork says what it is: %s", res)
	onceEach(t, dir, runID, fork, m[1])
	require.Equal(t, 0, strings.Count(res.Stdout, "started T"), "the second fork redoes nothing: %s", res)
	require.Equal(t, ref.Tree, killGit(t, dir, "ls-tree", "-r", "main"))
}

// onceEach checks that every task has one Taskloom-Task trailer on main,
// by one of runs.
func onceEach(t *testing.T, dir string, runs ...string) {
	t.Helper()
	counts := map[string]int{}
	for line := range strings.SplitSeq(killGit(t, dir, "log", "main", "--format=%(trailers:key=Taskloom-Task,valueonly,separator=%x0A)"), "\n") {
		if parts := strings.Split(strings.TrimSpace(line), "/"); len(parts) == 3 {
			require.Contains(t, runs, parts[0], line)
			counts[parts[1]]++
		}
	}
	for _, task := range killTasks {
		require.Equal(t, 1, counts[task], "trailers of %s on main: %v", task, counts)
	}
}

// damageHead damages run runID's newest checkpoint in the SQLite store at
// db and returns its step.
func damageHead(t *testing.T, db, runID string) int64 {
	t.Helper()
	s, err := session.OpenStore(context.Background(), db, &session.StoreOpts{SkipMigrate: true})
	require.NoError(t, err)
	defer s.Close()
	return storetest.DamageHead(t, s, runID)
}
