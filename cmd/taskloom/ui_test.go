package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
)

// Stopped with Ctrl-C (its context ends), taskloom ui says so and exits
// 130, as a run and a worker do.
func TestUIStoppedByTheUserExits130(t *testing.T) {
	t.Parallel()
	r := newStatusRepo(t, "")
	runID := r.start(t, "PRODUCT.md", exitOK)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var out, errOut testkit.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, []string{"ui", runID, "--repo", r.dir, "--addr", "127.0.0.1:0"}, strings.NewReader(""), &out, &errOut)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "(Ctrl-C to stop)") }, 10*time.Second, 10*time.Millisecond, errOut.String())
	stop()
	select {
	case code := <-done:
		require.Equal(t, exitInterrupted, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("taskloom ui did not stop")
	}
	require.True(t, strings.HasSuffix(out.String(), "taskloom ui stopped\n"), out.String())
	require.Empty(t, errOut.String())
}
