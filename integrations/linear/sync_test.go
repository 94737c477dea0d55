package linear_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/integrations/linear"
	"github.com/taskloom/taskloom/planner"
)

const testKey = "lin_api_test_0123456789abcdef"

// fake is a Linear GraphQL endpoint that checks each request against the
// shapes of Linear's public schema: the operation, its variable types and
// the inputs' required fields.
type fake struct {
	t      *testing.T
	down   atomic.Bool
	mu     sync.Mutex
	issues map[string]map[string]any // by id
	projs  map[string]map[string]any
	calls  map[string]int
}

var opShapes = map[string]*regexp.Regexp{
	"TeamStates":    regexp.MustCompile(`^query TeamStates\(\$id: String!\) \{\s*team\(id: \$id\) \{ id states \{ nodes \{ id name type position \} \} \}`),
	"Issue":         regexp.MustCompile(`^query Issue\(\$id: String!\) \{\s*issue\(id: \$id\) \{`),
	"IssueCreate":   regexp.MustCompile(`^mutation IssueCreate\(\$input: IssueCreateInput!\) \{\s*issueCreate\(input: \$input\) \{ success issue \{`),
	"IssueUpdate":   regexp.MustCompile(`^mutation IssueUpdate\(\$id: String!, \$input: IssueUpdateInput!\) \{\s*issueUpdate\(id: \$id, input: \$input\) \{ success`),
	"Project":       regexp.MustCompile(`^query Project\(\$id: String!\) \{ project\(id: \$id\) \{ id \} \}`),
	"ProjectCreate": regexp.MustCompile(`^mutation ProjectCreate\(\$input: ProjectCreateInput!\) \{\s*projectCreate\(input: \$input\) \{ success project \{ id \} \}`),
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

var states = []map[string]any{
	{"id": "st-backlog", "name": "Backlog", "type": "backlog", "position": 0},
	{"id": "st-todo", "name": "Todo", "type": "unstarted", "position": 1},
	{"id": "st-doing", "name": "In Progress", "type": "started", "position": 2},
	{"id": "st-review", "name": "In Review", "type": "started", "position": 3},
	{"id": "st-done", "name": "Done", "type": "completed", "position": 4},
	{"id": "st-canceled", "name": "Canceled", "type": "canceled", "position": 5},
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
		return
	}
	t := f.t
	if r.Header.Get("Authorization") != testKey || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("bad request: %s, content type %q, authorization set: %v", r.Method, r.Header.Get("Content-Type"), r.Header.Get("Authorization") != "")
	}
	var req struct {
		OperationName string         `json:"operationName"`
		Query         string         `json:"query"`
		Variables     map[string]any `json:"variables"`
	}
	require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
	shape, ok := opShapes[req.OperationName]
	if !ok || !shape.MatchString(req.Query) {
		t.Errorf("operation %q does not match Linear's schema: %s", req.OperationName, req.Query)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[req.OperationName]++
	input, _ := req.Variables["input"].(map[string]any)
	need := func(m map[string]any, names ...string) {
		for _, n := range names {
			if v, _ := m[n].(string); v == "" {
				t.Errorf("%s: required %s missing in %v", req.OperationName, n, m)
			}
		}
	}
	var data any
	notFound := false
	switch req.OperationName {
	case "TeamStates":
		need(req.Variables, "id")
		data = map[string]any{"team": map[string]any{"id": req.Variables["id"], "states": map[string]any{"nodes": states}}}
	case "Issue":
		need(req.Variables, "id")
		is, ok := f.issues[req.Variables["id"].(string)]
		notFound = !ok
		data = map[string]any{"issue": is}
	case "IssueCreate":
		need(input, "teamId", "title", "id", "stateId", "projectId")
		id := input["id"].(string)
		if !uuidRE.MatchString(id) {
			t.Errorf("issue id %q is not a UUID v4", id)
		}
		if _, dup := f.issues[id]; dup {
			t.Errorf("issue %s created twice", id)
		}
		if _, ok := f.projs[input["projectId"].(string)]; !ok {
			t.Errorf("issue %s in unknown project %v", id, input["projectId"])
		}
		is := map[string]any{"id": id, "identifier": fmt.Sprintf("ENG-%d", len(f.issues)+1), "title": input["title"],
			"project": input["projectId"], "state": map[string]any{"id": input["stateId"]}}
		f.issues[id] = is
		data = map[string]any{"issueCreate": map[string]any{"success": true, "issue": is}}
	case "IssueUpdate":
		need(req.Variables, "id")
		need(input, "stateId")
		is, ok := f.issues[req.Variables["id"].(string)]
		if !ok {
			t.Errorf("update of unknown issue %v", req.Variables["id"])
		} else {
			is["state"] = map[string]any{"id": input["stateId"]}
		}
		data = map[string]any{"issueUpdate": map[string]any{"success": ok, "issue": is}}
	case "Project":
		need(req.Variables, "id")
		p, ok := f.projs[req.Variables["id"].(string)]
		notFound = !ok
		data = map[string]any{"project": p}
	case "ProjectCreate":
		need(input, "name", "id")
		if teams, _ := input["teamIds"].([]any); len(teams) != 1 || teams[0] != "team-1" {
			t.Errorf("projectCreate teamIds = %v", input["teamIds"])
		}
		f.projs[input["id"].(string)] = map[string]any{"id": input["id"], "name": input["name"]}
		data = map[string]any{"projectCreate": map[string]any{"success": true, "project": map[string]any{"id": input["id"]}}}
	}
	resp := map[string]any{"data": data}
	if notFound {
		resp["errors"] = []map[string]any{{"message": "Entity not found", "extensions": map[string]any{"code": "ENTITY_NOT_FOUND"}}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func newFake(t *testing.T) (*fake, *httptest.Server) {
	f := &fake{t: t, issues: map[string]map[string]any{}, projs: map[string]map[string]any{}, calls: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

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
	f, srv := newFake(t)
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	newSyncer := func() *linear.Syncer {
		s := linear.NewSyncer(linear.SyncOpts{Client: linear.NewClient(srv.URL, testKey), TeamID: "team-1", Project: true,
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

	f.down.Store(true) // Linear goes away mid-run
	s.Tasks("run-1", tasks(planner.StatusInProgress, "T3", "T4"))
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	err := s.Drain(short)
	cancelShort()
	require.ErrorContains(t, err, "not yet mirrored")
	require.NotContains(t, err.Error(), testKey)
	require.Contains(t, logs.String(), "HTTP 503")

	f.down.Store(false) // back: the retries catch up
	s.Tasks("run-1", tasks(planner.StatusCompleted, "T3", "T4"))
	require.NoError(t, s.Drain(ctx))

	// The process ends; the run resumes in a new one and finishes T5.
	require.NoError(t, s.Close())
	s = newSyncer()
	s.Tasks("run-1", append(tasks(planner.StatusCompleted, "T1", "T2", "T3", "T4"), tasks(planner.StatusCompleted, "T5")...))
	require.NoError(t, s.Drain(ctx))

	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.projs, 1)
	require.Len(t, f.issues, 5)
	var titles []string
	for _, is := range f.issues {
		titles = append(titles, is["title"].(string))
		require.Equal(t, "st-done", is["state"].(map[string]any)["id"], is["title"])
		require.Contains(t, f.projs, is["project"])
	}
	require.ElementsMatch(t, []string{"T1: Task T1", "T2: Task T2", "T3: Task T3", "T4: Task T4", "T5: Task T5"}, titles)
	require.Equal(t, 5, f.calls["IssueCreate"])
	require.Equal(t, 1, f.calls["ProjectCreate"])
	for _, id := range ids {
		require.Equal(t, linear.StableID("issue", "run-1", id), s.IssueID("run-1", id))
	}
	require.NotContains(t, logs.String(), testKey)
	require.False(t, strings.Contains(fmt.Sprint(f.issues, f.projs), testKey))
}

// lockedBuffer is a log the sync's goroutine writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Skipped tasks end canceled.
func TestSkippedTaskIsCanceled(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t)
	s := linear.NewSyncer(linear.SyncOpts{Client: linear.NewClient(srv.URL, testKey), TeamID: "team-1", Project: true})
	defer s.Close()
	s.Tasks("run-2", tasks(planner.StatusSkipped, "T9"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Drain(ctx))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, "st-canceled", f.issues[linear.StableID("issue", "run-2", "T9")]["state"].(map[string]any)["id"])
}
