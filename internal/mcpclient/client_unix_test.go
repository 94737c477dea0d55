//go:build unix

package mcpclient_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/mcpclient"
)

// A server that hangs at start through a wrapper leaves nothing running:
// the wrapper's child goes with it, as it does when the client closes.
func TestHungServerLeavesNoProcess(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := newClient(t, mcpclient.Opts{
		Servers:      []mcpclient.Server{{Name: "wrapped", Command: []string{"sh", "-c", "sleep 60 & echo $! > " + pidFile + "; wait; echo done"}}},
		StartTimeout: time.Second,
	})
	servers := c.Servers(context.Background())
	require.Len(t, servers, 1)
	require.ErrorContains(t, servers[0].Err, "did not answer within 1s")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		// Signal 0 only asks whether the process is there; a zombie
		// reaped by init is soon gone.
		return syscall.Kill(pid, 0) != nil
	}, 5*time.Second, 20*time.Millisecond, "the wrapper's child %d still runs", pid)
}
