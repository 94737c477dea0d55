package linear_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/integrations/linear"
	"github.com/taskloom/taskloom/integrations/linear/lineartest"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

const testKey = "lin_api_test_0123456789abcdef"

func tasks(status planner.Status, ids ...string) []planner.Task {
	var out []planner.Task
	for _, id := range ids {
		out = append(out, planner.Task{ID: id, Title: "Task " + id, Status: status})
	}
	return out
}

// Five tasks go from pending through in progress to completed while the
// fake Linear goes down mid-run; the sync catches up when it is back, and
// a resumed run (a new Syncer) finds the issues again instead of creating
// new ones. The key is never logged.
func TestFiveTasksEndCompletedAcrossAnOutage(t *testing.T) {
	t.Parallel()
	f := lineartest.New(t, lineartest.Opts{Key: testKey})
	logs := &testkit.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	newSyncer := func() *linear.Syncer {
		s := linear.NewSyncer(linear.SyncOpts{Client: linear.NewClient(f.URL, testKey), TeamID: lineartest.TeamID, Project: true,
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: logger})
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
	ids := []string{"T1", "T2", "T3", "T4", "T5"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	s := newSyncer()
	s.Tasks("run-1", tasks(planner.StatusPending, ids...))
	s.Tasks("run-1", tasks(planner.StatusInProgress, "T1", "T2"))
	require.NoError(t, s.Drain(ctx))
	s.Tasks("run-1", tasks(planner.StatusCompleted, "T1", "T2"))

	f.SetDown(true) // Linear goes away mid-run
	s.Tasks("run-1", tasks(planner.StatusInProgress, "T3", "T4"))
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	err := s.Drain(short)
	cancelShort()
	require.ErrorContains(t, err, "not yet mirrored")
	require.NotContains(t, err.Error(), testKey)
	require.Contains(t, logs.String(), "HTTP 503")

	f.SetDown(false) // back: the retries catch up
	s.Tasks("run-1", tasks(planner.StatusCompleted, "T3", "T4"))
	require.NoError(t, s.Drain(ctx))

	// The process ends; the run resumes in a new one and finishes T5.
	require.NoError(t, s.Close())
	s = newSyncer()
	s.Tasks("run-1", append(tasks(planner.StatusCompleted, "T1", "T2", "T3", "T4"), tasks(planner.StatusCompleted, "T5")...))
	require.NoError(t, s.Drain(ctx))

	projects, issues := f.Projects(), f.Issues()
	require.Len(t, projects, 1)
	require.Len(t, issues, 5)
	var titles []string
	for _, is := range issues {
		titles = append(titles, is.Title)
		require.Equal(t, lineartest.StateDone, is.StateID, is.Title)
		require.Contains(t, projects, is.ProjectID)
	}
	require.ElementsMatch(t, []string{"T1: Task T1", "T2: Task T2", "T3: Task T3", "T4: Task T4", "T5: Task T5"}, titles)
	require.Equal(t, 5, f.Calls()["IssueCreate"])
	require.Equal(t, 1, f.Calls()["ProjectCreate"])
	for _, id := range ids {
		require.Equal(t, linear.StableID("issue", "run-1", id), s.IssueID("run-1", id))
	}
	require.NotContains(t, logs.String(), testKey)
	require.NotContains(t, strings.Join(f.Bodies(), "\n"), testKey)
}

// Skipped tasks end canceled.
func TestSkippedTaskIsCanceled(t *testing.T) {
	t.Parallel()
	f := lineartest.New(t, lineartest.Opts{Key: testKey})
	s := linear.NewSyncer(linear.SyncOpts{Client: linear.NewClient(f.URL, testKey), TeamID: lineartest.TeamID, Project: true})
	defer s.Close()
	s.Tasks("run-2", tasks(planner.StatusSkipped, "T9"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Drain(ctx))
	require.Equal(t, lineartest.StateCanceled, f.Issues()[linear.StableID("issue", "run-2", "T9")].StateID)
}

// An issue deleted in Linear mid-run holds up no other task's issue, and
// is made again.
func TestDeletedIssueHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	f := lineartest.New(t, lineartest.Opts{Key: testKey})
	s := linear.NewSyncer(linear.SyncOpts{Client: linear.NewClient(f.URL, testKey), TeamID: lineartest.TeamID, Project: true,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Tasks("run-4", tasks(planner.StatusPending, "T1", "T2", "T3"))
	require.NoError(t, s.Drain(ctx))
	f.DeleteIssue(linear.StableID("issue", "run-4", "T1"))
	s.Tasks("run-4", tasks(planner.StatusCompleted, "T1", "T2", "T3"))
	require.NoError(t, s.Drain(ctx))
	issues := f.Issues()
	require.Len(t, issues, 3)
	for _, is := range issues {
		require.Equal(t, lineartest.StateDone, is.StateID, is.Title)
	}
}

// A sync turned on without its key is one warning line, and the run goes
// on without it; with the key, the runner gets the sync.
func TestAttach(t *testing.T) {
	cfg := config.Default()
	cfg.Integrations.Linear = config.Linear{Enabled: true, TeamID: lineartest.TeamID}
	t.Setenv(linear.KeyEnv, "")
	var warnings bytes.Buffer
	r := &nodes.Runner{}
	require.Nil(t, linear.Attach(r, cfg, &warnings, nil))
	require.Nil(t, r.Sync)
	require.Equal(t, "taskloom: warning: integrations.linear.enabled is true but LINEAR_API_KEY is not set; set it or turn the sync off\n", warnings.String())

	t.Setenv(linear.KeyEnv, testKey)
	warnings.Reset()
	s := linear.Attach(r, cfg, &warnings, nil)
	require.NotNil(t, s)
	defer s.Close()
	require.Same(t, s, r.Sync)
	require.Empty(t, warnings.String())

	cfg.Integrations.Linear.Enabled = false
	r = &nodes.Runner{}
	require.Nil(t, linear.Attach(r, cfg, &warnings, nil))
	require.Nil(t, r.Sync)
	require.Empty(t, warnings.String())
}

// A refused key or an unknown team does not fix itself: the sync says
// what to change rather than promise to catch up on resume.
func TestUnfixableErrorsSayWhatToChange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"key refused", http.StatusUnauthorized, `{"errors":[{"message":"Authentication required"}]}`, "LINEAR_API_KEY"},
		{"key refused in GraphQL", http.StatusBadRequest,
			`{"errors":[{"message":"Authentication required, not authenticated","extensions":{"code":"AUTHENTICATION_ERROR"}}]}`, "LINEAR_API_KEY"},
		{"unknown team", http.StatusOK, `{"data":null,"errors":[{"message":"Entity not found: Team","extensions":{"code":"ENTITY_NOT_FOUND"}}]}`,
			`team "TEAM-X": no such Linear team for this key; set integrations.linear.team_id`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			s := linear.NewSyncer(linear.SyncOpts{Client: linear.NewClient(srv.URL, testKey), TeamID: "TEAM-X",
				MinBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
			defer s.Close()
			s.Tasks("run-3", tasks(planner.StatusPending, "T1"))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := s.Drain(ctx)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "catch up on resume")
			require.NotContains(t, err.Error(), testKey)
		})
	}
}

// A Linear that never answers: the run's end says how many tasks are not
// mirrored, counted once each however often they were handed on, and why
// in words, not "<nil>".
func TestDrainOfASilentLinearCountsTasksOnce(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
			http.Error(w, "gone", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	s := linear.NewSyncer(linear.SyncOpts{Client: linear.NewClient(srv.URL, testKey), TeamID: lineartest.TeamID})
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() { close(done) })
	for _, st := range []planner.Status{planner.StatusPending, planner.StatusInProgress, planner.StatusCompleted} {
		s.Tasks("r1", tasks(st, "T1", "T2"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := s.Drain(ctx)
	require.EqualError(t, err, "linear sync: 2 tasks not yet mirrored (Linear has not answered yet); they catch up on resume")
}
