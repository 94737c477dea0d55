package main

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/integrations/linear"
	"github.com/taskloom/taskloom/integrations/linear/lineartest"
)

// The textkit run's five tasks (T3 splits in two) become five issues in
// the run's project, all ending completed, while Linear goes away when the
// first task completes. On SQLite it stays away until the run ends: the
// run still completes (exit 0, a warning line) and a resume of the
// completed run catches the sync up. On PostgreSQL it comes back after two
// refused requests, and the sync catches up by the end of the run.
// status --json shows each task's issue, and the key is nowhere in the
// store or the output.
func TestE2ELinearSync(t *testing.T) {
	skipShort(t)
	const key = "lin_api_e2e_5ecretLinearKey0123456789"
	t.Setenv(linear.KeyEnv, key)
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			staysDown := kind == "sqlite"
			var (
				mu       sync.Mutex
				wentDown bool
				refused  int
				fake     *lineartest.Fake
			)
			fake = lineartest.New(t, lineartest.Opts{Key: key, Hook: func(r lineartest.Request) {
				mu.Lock()
				defer mu.Unlock()
				if fake.Down() {
					if refused++; !staysDown && refused >= 2 {
						fake.SetDown(false)
					}
					return
				}
				input, _ := r.Variables["input"].(map[string]any)
				if r.Op == "IssueUpdate" && input["stateId"] == lineartest.StateDone && !wentDown {
					wentDown = true
					fake.SetDown(true) // this update is refused too
				}
			}})
			dir := exampleRepo(t, func(c map[string]any) {
				c["integrations"] = map[string]any{"linear": map[string]any{
					"enabled": true, "team_id": lineartest.TeamID, "create_project": true, "url": fake.URL}}
			}, nil)
			db := storeArgs(t, kind)
			args := append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)
			code, stdout, stderr := taskloom(t, args...)
			require.Equal(t, 0, code, "Linear being down never fails a run\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			id := runID(t, stdout)
			output := stdout + stderr
			mu.Lock()
			require.True(t, wentDown, "Linear went down mid-run")
			mu.Unlock()

			issues := fake.Issues()
			require.Len(t, issues, 5, "an issue per task, made before Linear went down")
			done := 0
			for _, is := range issues {
				if is.StateID == lineartest.StateDone {
					done++
				}
			}
			if staysDown {
				require.Less(t, done, 5, "Linear was down since the first completion")
				require.Regexp(t, `(?m)^taskloom: warning: linear sync: [0-9]+ tasks not yet mirrored \(.*HTTP 503.*\); they catch up on resume$`, stderr)
				fake.SetDown(false)
				// The branch has moved on since (here: rewound), which a
				// run that goes on would refuse; a completed one only
				// catches up, and leaves the branch be.
				git(t, dir, "reset", "-q", "--hard", "HEAD~1")
				head := git(t, dir, "rev-parse", "HEAD")
				code, rout, rerr := taskloom(t, append([]string{"resume", id, "--repo", dir}, db...)...)
				require.Equal(t, 0, code, "resume of a completed run\nstdout:\n%s\nstderr:\n%s", rout, rerr)
				require.NotContains(t, rout, "started T", "nothing runs again")
				require.Empty(t, rerr)
				require.Equal(t, head, git(t, dir, "rev-parse", "HEAD"))
				output += rout + rerr
			} else {
				require.Equal(t, 5, done, "caught up by the end of the run\nstderr:\n%s", stderr)
				require.NotContains(t, stderr, "not yet mirrored")
			}

			projects := fake.Projects()
			require.Len(t, projects, 1)
			titles := map[string]string{}
			for _, is := range fake.Issues() {
				require.Equal(t, lineartest.StateDone, is.StateID, is.Title)
				require.Contains(t, projects, is.ProjectID)
				titles[is.ID] = is.Title
			}
			require.Equal(t, 5, fake.Calls()["IssueCreate"], "no issue made twice")

			// status --json shows each task's issue.
			code, sout, serr := taskloom(t, append([]string{"status", id, "--repo", dir, "--json"}, db...)...)
			require.Equal(t, 0, code, serr)
			output += sout + serr
			var st struct {
				Status       string `json:"status"`
				LinearIssues []struct {
					TaskID        string `json:"task_id"`
					LinearIssueID string `json:"linear_issue_id"`
				} `json:"linear_issues"`
			}
			require.NoError(t, json.Unmarshal([]byte(sout), &st))
			require.Equal(t, "completed", st.Status)
			var tasks []string
			for _, li := range st.LinearIssues {
				tasks = append(tasks, li.TaskID)
				require.Equal(t, linear.StableID("issue", id, li.TaskID), li.LinearIssueID)
				require.True(t, strings.HasPrefix(titles[li.LinearIssueID], li.TaskID+": "), "the issue of %s: %q", li.TaskID, titles[li.LinearIssueID])
			}
			sort.Strings(tasks)
			require.Equal(t, []string{"T1", "T2", "T3-a", "T3-b", "T4"}, tasks)

			require.NotContains(t, output, key)
			require.NotContains(t, dumpStore(t, kind, dir, args), key, "the key is never stored")
			require.NotContains(t, dumpStore(t, kind, dir, args), "5ecretLinearKey")
		})
	}
}
