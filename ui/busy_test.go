package ui_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReviewRefusedWhileDriven: a decision for a run that another process
// holds is refused as a conflict that names the holder, and nothing is
// recorded.
func TestReviewRefusedWhileDriven(t *testing.T) {
	forEachEscalatedRun(t, func(t *testing.T, dbURL, _, runID string) {
		d, _ := openStore(t, dbURL)
		_, err := d.Acquire(t.Context(), runID, "other-host:4242", time.Time{}, time.Hour)
		require.NoError(t, err)

		h := newServer(t, dbURL, runID, nil).Handler()
		csrf := csrfOf(t, do(t, h, "GET", "/", nil, nil).Body.String())
		res := do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(`{"task":"T1","action":"skip"}`), pageHeader(csrf))
		require.Equal(t, http.StatusConflict, res.Code, res.Body.String())
		require.Contains(t, res.Body.String(), "being driven by another process (other-host:4242)")
		require.Empty(t, recordedAnswers(t, dbURL, runID))
	})
}

// TestOtherMethodsRefused: a method the ui has no use for is a 405 that
// names the ones it takes, before any check of the request's origin.
func TestOtherMethodsRefused(t *testing.T) {
	t.Parallel()
	dbURL := stores[0].newURL(t)
	_, runID := escalatedRun(t, dbURL)
	h := newServer(t, dbURL, runID, nil).Handler()
	for _, m := range []string{"DELETE", "PUT", "PATCH"} {
		res := do(t, h, m, "/api/runs/"+runID, nil, nil)
		require.Equal(t, http.StatusMethodNotAllowed, res.Code, m)
		require.Equal(t, "GET, HEAD, POST", res.Header().Get("Allow"))
	}
}

// TestUnknownRunPage: the page of a run the store does not have is an
// HTML 404 with a way back, as a browser expects; the API's is JSON.
func TestUnknownRunPage(t *testing.T) {
	t.Parallel()
	dbURL := stores[0].newURL(t)
	_, runID := escalatedRun(t, dbURL)
	h := newServer(t, dbURL, runID, nil).Handler()
	res := do(t, h, "GET", "/runs/nope", nil, nil)
	require.Equal(t, http.StatusNotFound, res.Code)
	require.Equal(t, "text/html; charset=utf-8", res.Header().Get("Content-Type"))
	require.Contains(t, res.Body.String(), `<a href="/">All runs</a>`)
	require.Contains(t, res.Body.String(), "run nope")
	res = do(t, h, "GET", "/api/runs/nope", nil, nil)
	require.Equal(t, http.StatusNotFound, res.Code)
	require.Equal(t, "application/json", res.Header().Get("Content-Type"))
}

// TestReviewNoteSecretNotEchoed: a key pasted into a note from the page is
// neither recorded nor sent back. (It sets an environment variable, so it
// does not run in parallel.)
func TestReviewNoteSecretNotEchoed(t *testing.T) {
	const secret = "tl-ui-s3cret-0123456789"
	t.Setenv("TASKLOOM_TEST_UI_SECRET", secret)
	dbURL := stores[0].newURL(t)
	_, runID := escalatedRun(t, dbURL)
	h := newServer(t, dbURL, runID, nil).Handler()
	csrf := csrfOf(t, do(t, h, "GET", "/", nil, nil).Body.String())
	res := do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(`{"task":"T1","action":"retry","note":"use `+secret+` here"}`), pageHeader(csrf))
	require.Equal(t, http.StatusOK, res.Code, res.Body.String())
	require.NotContains(t, res.Body.String(), secret)
	require.Contains(t, res.Body.String(), "use ")
	require.NotContains(t, recordedAnswers(t, dbURL, runID)["T1"], secret)
}
