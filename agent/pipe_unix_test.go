//go:build unix

package agent_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
)

// A named pipe a command left in the worktree is refused by the file
// tools at once: read, it would hold the attempt, past worker.timeout and
// Ctrl-C, until something wrote to it.
func TestFileToolsRefuseANamedPipe(t *testing.T) {
	t.Parallel()
	for tool, args := range map[string]string{
		"read_file":     `{"path": "p"}`,
		"write_to_file": `{"path": "p", "content": "x"}`,
		"apply_diff":    `{"path": "p", "diff": "<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE"}`,
	} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			e := setup(t, callThenComplete(`{"name": "`+tool+`", "arguments": `+args+`}`), nil)
			require.NoError(t, syscall.Mkfifo(filepath.Join(e.wt, "p"), 0o644))
			done := make(chan *agent.Result, 1)
			go func() { done <- e.run(t, "c1", "Do it", "") }()
			select {
			case res := <-done:
				require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
			case <-time.After(30 * time.Second):
				t.Fatal("a named pipe held the tool")
			}
			r := resultFor(t, e.load(t, "c1"), 0)
			require.True(t, r.IsError)
			require.Contains(t, r.Content, "p is not a regular file (a named pipe)")
		})
	}
}
