//go:build unix

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/store/storetest"
)

// TestKillResetResume kills a run after its first batch (T1 integrated, T2
// failed once), then the user drops T1's commit from main with
// git reset --hard HEAD~1. Resume must refuse, naming the head the run
// recorded and main's new head, and leave main alone, every time it is
// asked. resume --accept-head then takes main as it is and completes the
// run, redoing T1 alone: the result is an uninterrupted run's.
func TestKillResetResume(t *testing.T) {
	bin, ref := killSetup(t)
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run("store="+store, func(t *testing.T) {
			t.Parallel()
			db := ""
			if store == "postgres" {
				db = storetest.NewPostgresSchema(t)
			}
			dir, runID := killCrashDemo(t, bin, db, "select:start#2")
			require.Equal(t, map[string]int{"T1": 1}, killTrailers(t, dir, runID), "the first batch integrated T1")
			integrated := strings.TrimSpace(killGit(t, dir, "rev-parse", "main"))
			killGit(t, dir, "reset", "-q", "--hard", "HEAD~1")
			reset := strings.TrimSpace(killGit(t, dir, "rev-parse", "main"))

			// The command it suggests finds the store the resume was given.
			flags := " --repo '" + dir + "'"
			if db != "" {
				flags += " --db '" + db + "'"
			}
			want := fmt.Sprintf("taskloom: main was reset or rewritten under run %s: it was at %s, now at %s; restore it, or run \"taskloom resume %s%s --accept-head\"\n",
				runID, integrated[:7], reset[:7], runID, flags)
			for range 2 {
				res := killExec(t, bin, dir, "", killResumeArgs(runID, dir, db)...)
				require.Equal(t, exitError, res.Code, "resume after the reset: %s", res)
				require.Equal(t, want, res.Stderr)
				require.Equal(t, reset, strings.TrimSpace(killGit(t, dir, "rev-parse", "main")), "main stays where the user put it")
			}

			res := killExec(t, bin, dir, "", killResumeArgs(runID, dir, db, "--accept-head")...)
			require.Equal(t, exitOK, res.Code, "resume --accept-head: %s", res)
			require.Contains(t, res.Stdout, fmt.Sprintf("accepted main at %s; redoing T1, whose commits are gone from it", reset[:7]))
			killCheck(t, bin, dir, db, runID, ref)
			// T1 was redone in a new try; the others kept their usual tries.
			tr := killGit(t, dir, "log", "main", "--format=%(trailers:key=Taskloom-Task,valueonly)")
			require.Contains(t, tr, runID+"/T1/2")
			require.Contains(t, tr, runID+"/T2/2")
			require.Contains(t, tr, runID+"/T3-a/1")
			require.Contains(t, tr, runID+"/T4/1")
		})
	}
}
