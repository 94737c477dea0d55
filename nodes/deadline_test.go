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

	"github.com/taskloom/taskloom/llm"
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
