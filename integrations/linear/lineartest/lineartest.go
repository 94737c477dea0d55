// Package lineartest is a fake Linear GraphQL endpoint for tests. It
// checks each request against the shapes of Linear's public schema (the
// operation, its variable types and the inputs' required fields) and
// keeps the issues and projects made, so that a test can tell what a sync
// left in Linear.
package lineartest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
)

// TeamID is the team the fake knows.
const TeamID = "team-1"

// Workflow state IDs of the fake's team: two of type started, so that a
// sync must pick one by position.
const (
	StateTodo     = "st-todo"
	StateDoing    = "st-doing"
	StateDone     = "st-done"
	StateCanceled = "st-canceled"
)

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
	{"id": StateTodo, "name": "Todo", "type": "unstarted", "position": 1},
	{"id": StateDoing, "name": "In Progress", "type": "started", "position": 2},
	{"id": "st-review", "name": "In Review", "type": "started", "position": 3},
	{"id": StateDone, "name": "Done", "type": "completed", "position": 4},
	{"id": StateCanceled, "name": "Canceled", "type": "canceled", "position": 5},
}

// Issue is an issue the fake holds.
type Issue struct {
	ID, Title, ProjectID, StateID string
}

// Request is an operation the fake was sent.
type Request struct {
	Op        string
	Variables map[string]any
}

// Fake is the endpoint; its methods are safe for concurrent use.
type Fake struct {
	// URL is the endpoint's address.
	URL string

	t      testing.TB
	key    string
	hook   func(Request)
	mu     sync.Mutex
	down   bool
	issues map[string]map[string]any // by id
	gone   map[string]bool           // issues DeleteIssue deleted
	projs  map[string]map[string]any
	calls  map[string]int
	bodies []string
}

// Opts configures a Fake.
type Opts struct {
	// Key is the API key every request must carry.
	Key string
	// Hook, when set, hears every request before it is answered (or
	// refused while the fake is down); it may call SetDown.
	Hook func(Request)
}

// New starts a fake endpoint, stopped when the test ends.
func New(t testing.TB, o Opts) *Fake {
	f := &Fake{t: t, key: o.Key, hook: o.Hook, issues: map[string]map[string]any{}, gone: map[string]bool{}, projs: map[string]map[string]any{}, calls: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// SetDown makes the fake answer 503, as Linear does when it is away.
func (f *Fake) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// Down says whether the fake answers 503.
func (f *Fake) Down() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

// Issues returns the issues made, by ID.
func (f *Fake) Issues() map[string]Issue {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]Issue{}
	for id, is := range f.issues {
		st, _ := is["state"].(map[string]any)
		out[id] = Issue{ID: id, Title: fmt.Sprint(is["title"]), ProjectID: fmt.Sprint(is["project"]), StateID: fmt.Sprint(st["id"])}
	}
	return out
}

// DeleteIssue deletes an issue, as a person may in Linear mid-run.
func (f *Fake) DeleteIssue(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.issues, id)
	f.gone[id] = true
}

// Projects returns the names of the projects made, by ID.
func (f *Fake) Projects() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for id, p := range f.projs {
		out[id] = fmt.Sprint(p["name"])
	}
	return out
}

// Calls returns how many times each operation was answered.
func (f *Fake) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

// Bodies returns the body of every request, for a test that checks what
// was sent.
func (f *Fake) Bodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := f.t
	if r.Header.Get("Authorization") != f.key || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("linear fake: bad request: %s, content type %q, authorization set: %v", r.Method, r.Header.Get("Content-Type"), r.Header.Get("Authorization") != "")
	}
	var req struct {
		OperationName string         `json:"operationName"`
		Query         string         `json:"query"`
		Variables     map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		t.Errorf("linear fake: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if f.hook != nil {
		f.hook(Request{Op: req.OperationName, Variables: req.Variables})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := json.Marshal(req)
	f.bodies = append(f.bodies, string(body))
	if f.down {
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
		return
	}
	shape, ok := opShapes[req.OperationName]
	if !ok || !shape.MatchString(req.Query) {
		t.Errorf("linear fake: operation %q does not match Linear's schema: %s", req.OperationName, req.Query)
	}
	f.calls[req.OperationName]++
	data, notFound := f.answer(req.OperationName, req.Variables)
	resp := map[string]any{"data": data}
	if notFound {
		resp["errors"] = []map[string]any{{"message": "Entity not found", "extensions": map[string]any{"code": "ENTITY_NOT_FOUND"}}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// answer acts on one operation; f.mu is held.
func (f *Fake) answer(op string, vars map[string]any) (data any, notFound bool) {
	t := f.t
	input, _ := vars["input"].(map[string]any)
	need := func(m map[string]any, names ...string) {
		for _, n := range names {
			if v, _ := m[n].(string); v == "" {
				t.Errorf("linear fake: %s: required %s missing in %v", op, n, m)
			}
		}
	}
	switch op {
	case "TeamStates":
		need(vars, "id")
		if vars["id"] != TeamID {
			return map[string]any{"team": nil}, true
		}
		return map[string]any{"team": map[string]any{"id": vars["id"], "states": map[string]any{"nodes": states}}}, false
	case "Issue":
		need(vars, "id")
		is, ok := f.issues[fmt.Sprint(vars["id"])]
		return map[string]any{"issue": is}, !ok
	case "IssueCreate":
		need(input, "teamId", "title", "id", "stateId", "projectId")
		id := fmt.Sprint(input["id"])
		if !uuidRE.MatchString(id) {
			t.Errorf("linear fake: issue id %q is not a UUID v4", id)
		}
		if _, dup := f.issues[id]; dup {
			t.Errorf("linear fake: issue %s created twice", id)
		}
		if _, ok := f.projs[fmt.Sprint(input["projectId"])]; !ok {
			t.Errorf("linear fake: issue %s in unknown project %v", id, input["projectId"])
		}
		is := map[string]any{"id": id, "identifier": fmt.Sprintf("ENG-%d", len(f.issues)+1), "title": input["title"],
			"project": input["projectId"], "state": map[string]any{"id": input["stateId"]}}
		f.issues[id] = is
		return map[string]any{"issueCreate": map[string]any{"success": true, "issue": is}}, false
	case "IssueUpdate":
		need(vars, "id")
		need(input, "stateId")
		is, ok := f.issues[fmt.Sprint(vars["id"])]
		switch {
		case !ok && f.gone[fmt.Sprint(vars["id"])]:
			return map[string]any{"issueUpdate": nil}, true
		case !ok:
			t.Errorf("linear fake: update of unknown issue %v", vars["id"])
		default:
			is["state"] = map[string]any{"id": input["stateId"]}
		}
		return map[string]any{"issueUpdate": map[string]any{"success": ok, "issue": is}}, false
	case "Project":
		need(vars, "id")
		p, ok := f.projs[fmt.Sprint(vars["id"])]
		return map[string]any{"project": p}, !ok
	case "ProjectCreate":
		need(input, "name", "id")
		if teams, _ := input["teamIds"].([]any); len(teams) != 1 || teams[0] != TeamID {
			t.Errorf("linear fake: projectCreate teamIds = %v", input["teamIds"])
		}
		f.projs[fmt.Sprint(input["id"])] = map[string]any{"id": input["id"], "name": input["name"]}
		return map[string]any{"projectCreate": map[string]any{"success": true, "project": map[string]any{"id": input["id"]}}}, false
	}
	return nil, false
}
