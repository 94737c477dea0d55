package report

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/nodes"
)

// A run recorded as running is interrupted once its thread's lease was
// released or lapsed: its process stopped without saying so (kill -9). A
// run whose lease is held is running, whatever was recorded.
func TestLiveStatus(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	host, _ := os.Hostname()
	threads := map[string]checkpoint.ThreadInfo{
		// killed with kill -9 on this machine: its lease has not lapsed.
		"killed":   {ThreadID: "killed", Holder: fmt.Sprintf("pid %d, host %s", dead.Process.Pid, host), Expires: now.Add(20 * time.Second)},
		"held":     {ThreadID: "held", Holder: "host:1", Expires: now.Add(20 * time.Second)},
		"lapsed":   {ThreadID: "lapsed", Holder: "host:2", Expires: now.Add(-time.Second)},
		"released": {ThreadID: "released"},
		"paused":   {ThreadID: "paused"},
	}
	for _, c := range []struct{ id, status, want string }{
		{"held", nodes.RunRunning, nodes.RunRunning},
		{"lapsed", nodes.RunRunning, nodes.RunInterrupted},
		{"released", nodes.RunRunning, nodes.RunInterrupted},
		{"starting", nodes.RunRunning, nodes.RunRunning}, // no thread yet
		{"paused", nodes.RunPaused, nodes.RunPaused},
		// A paused or stopped run that a resume drives again.
		{"held", nodes.RunPaused, nodes.RunRunning},
		{"held", nodes.RunInterrupted, nodes.RunRunning},
		{"lapsed", nodes.RunPaused, nodes.RunPaused},
		{"killed", nodes.RunRunning, nodes.RunInterrupted},
	} {
		require.Equal(t, c.want, liveStatus(nodes.Run{ID: c.id, Status: c.status}, threads, now), c.id)
	}
}

// Runs of one repository list as they always did; runs of several (a
// store a team shares) each say whose they are.
func TestWriteRunsNamesTheRepoWhenThereAreSeveral(t *testing.T) {
	one := []Row{{RunID: "r1", Product: "/a/PRODUCT.md", Repo: "/a", Status: nodes.RunCompleted, Progress: "100%"}}
	var out strings.Builder
	require.NoError(t, WriteRuns(&out, one, ""))
	require.True(t, strings.HasPrefix(out.String(), "ID  PRODUCT"), out.String())
	two := append(one, Row{RunID: "r2", Product: "/b/PRODUCT.md", Repo: "/b", Status: nodes.RunRunning, Progress: "0%"})
	out.Reset()
	require.NoError(t, WriteRuns(&out, two, ""))
	require.True(t, strings.HasPrefix(out.String(), "ID  REPO  PRODUCT"), out.String())
	require.Contains(t, out.String(), "r2  /b    PRODUCT.md")
}
