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
