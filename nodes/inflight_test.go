package nodes

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/verify"
)

// Rate limits cost the worker none of worker.timeout: the waits, and the
// failed requests before them, push its deadline back. Its own time still
// runs out.
func TestProviderWaitsDoNotUseTheWorkerTimeout(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			time.Sleep(100 * time.Millisecond) // the failed request's own time
			w.Header().Set("retry-after-ms", "250")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: llm.NewTransportWith(http.DefaultTransport, &llm.TransportOpts{Provider: llm.ProviderAnthropic, MaxRetries: 4})}

	ctx, cancel := workerDeadline(context.Background(), 400*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "about 1s of rate limits against a 400ms worker timeout")
	_ = resp.Body.Close()
	require.Equal(t, int32(4), calls.Load())
	require.NoError(t, ctx.Err())

	select {
	case <-ctx.Done():
		require.True(t, errors.Is(context.Cause(ctx), errWorkerTimeout))
	case <-time.After(5 * time.Second):
		t.Fatal("the worker's own time never ran out")
	}
}

// A worker held back by another worker's 429 (the shared limiter's pause)
// loses none of its time either: the wait is told before it starts.
func TestSharedRateLimitPauseDoesNotUseTheWorkerTimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{}`) }))
	t.Cleanup(srv.Close)
	lim := llm.NewLimiter(0, nil)
	client := &http.Client{Transport: llm.NewTransportWith(http.DefaultTransport, &llm.TransportOpts{Provider: llm.ProviderAnthropic, Limiter: lim})}
	lim.Pause(800 * time.Millisecond) // another worker's 429
	ctx, cancel := workerDeadline(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "an 800ms pause against a 300ms worker timeout")
	_ = resp.Body.Close()
	require.NoError(t, ctx.Err())
}

// An attempt under way has no record yet; what its conversations used so
// far is counted from the store, once its record exists from the record.
func TestUnendedUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := NewStore(storetest.NewMemory(t))
	require.NoError(t, err)
	const run = "r1"
	for _, id := range []string{run + "/T1/2", run + "/T2/1"} {
		require.NoError(t, st.Histories(run).Save(ctx, &agent.Record{Meta: agent.Metadata{ID: id, RootID: id, Mode: "code",
			Usage: agent.Usage{InputTokens: 100, OutputTokens: 10}, SubtaskUsage: agent.Usage{InputTokens: 5}}}))
	}
	var s State
	s.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusInProgress, Attempts: 1})
	s.Tasks.Put("T2", planner.Task{ID: "T2", Status: planner.StatusCompleted})
	s.Attempts.Put("T1/1", Attempt{TaskID: "T1", Attempt: 1, Error: "failed", InputTokens: 50})
	u, err := st.UnendedUsage(ctx, run, s)
	require.NoError(t, err)
	require.Equal(t, llm.Usage{InputTokens: 105, OutputTokens: 10}, u, "T1's attempt 2 with its finished subtasks; T2 has ended")

	s.Attempts.Put("T1/2", Attempt{TaskID: "T1", Attempt: 2, Verified: true, Tests: &verify.Verdict{Passed: true}, InputTokens: 105})
	u, err = st.UnendedUsage(ctx, run, s)
	require.NoError(t, err)
	require.Zero(t, u, "recorded: counted from its record, not twice")
}
