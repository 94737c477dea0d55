package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/ui"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr        string
		allowRemote bool
		wantRemote  bool // ErrRemote
		wantErr     bool
	}{
		{addr: "127.0.0.1:7070"},
		{addr: "127.9.9.9:0"},
		{addr: "localhost:7070"},
		{addr: "[::1]:7070"},
		{addr: "0.0.0.0:7070", wantRemote: true, wantErr: true},
		{addr: "192.168.1.10:7070", wantRemote: true, wantErr: true},
		{addr: ":7070", wantRemote: true, wantErr: true}, // every interface
		{addr: "0.0.0.0:7070", allowRemote: true},
		{addr: "7070", wantErr: true},
	} {
		err := ui.CheckAddr(c.addr, c.allowRemote)
		require.Equal(t, c.wantErr, err != nil, "CheckAddr(%q, %v) = %v", c.addr, c.allowRemote, err)
		require.Equal(t, c.wantRemote, errors.Is(err, ui.ErrRemote), "CheckAddr(%q, %v) = %v", c.addr, c.allowRemote, err)
	}
	_, err := ui.New(ui.Opts{Addr: "0.0.0.0:7070"})
	require.Error(t, err)
}

// do sends a request to h on its loopback address and returns the
// response.
func do(t *testing.T, h http.Handler, method, target string, body io.Reader, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	return doAt(t, h, "127.0.0.1:7070", method, target, body, header)
}

// doAt sends a request naming host to h and returns the response.
func doAt(t *testing.T, h http.Handler, host, method, target string, body io.Reader, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, body)
	r.Host = host
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// csrfOf reads the page's CSRF token.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<meta name="taskloom-csrf" content="`)
	require.True(t, ok, "no CSRF token in the page")
	token, _, _ := strings.Cut(rest, `"`)
	require.Len(t, token, 64)
	return token
}

// pageHeader are the headers of the page's own POSTs.
func pageHeader(csrf string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Origin": {"http://127.0.0.1:7070"},
		"Sec-Fetch-Site": {"same-origin"}, "X-Taskloom-Csrf": {csrf}}
}

// TestPageAndAPI shows an escalated run on both stores: the page names
// every task with its status, the API shows the escalation, the task's
// detail has its diff, test output and conversation, and a retry recorded
// from the page is recorded as taskloom review records it, which resume
// then acts on.
func TestPageAndAPI(t *testing.T) {
	t.Parallel()
	forEachEscalatedRun(t, func(t *testing.T, dbURL, repo, runID string) {
		h := newServer(t, dbURL, runID, &ui.Opts{ResumeFlags: []string{"--repo", repo}}).Handler()

		page := do(t, h, "GET", "/", nil, nil)
		require.Equal(t, http.StatusOK, page.Code, page.Body.String())
		body := page.Body.String()
		require.Contains(t, body, `aria-label="T1: Write the notes file, status escalated`)
		require.Contains(t, body, `aria-label="T2: Write the log file, status completed`)
		require.Contains(t, body, `class="node st-escalated`)
		for _, attr := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "url(http"} {
			require.NotContains(t, body, attr, "the page loads nothing from outside its server")
		}
		require.Contains(t, page.Header().Get("Content-Security-Policy"), "default-src 'none'")
		// The page's files are served one by one: no listing, no template.
		require.Equal(t, http.StatusOK, do(t, h, "GET", "/assets/app.js", nil, nil).Code)
		for _, path := range []string{"/assets/", "/assets/page.html"} {
			require.Equal(t, http.StatusNotFound, do(t, h, "GET", path, nil, nil).Code, path)
		}

		var snap struct {
			Status      string `json:"status"`
			Escalations []struct {
				TaskID string `json:"task_id"`
				Reason string `json:"reason"`
			} `json:"escalations"`
			Tasks []struct {
				ID      string `json:"id"`
				Status  string `json:"status"`
				Attempt int    `json:"attempt"`
			} `json:"tasks"`
			Resume     string `json:"resume"`
			Milestones []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"milestones"`
		}
		res := do(t, h, "GET", "/api/runs/"+runID, nil, nil)
		require.Equal(t, http.StatusOK, res.Code, res.Body.String())
		require.NoError(t, json.Unmarshal(res.Body.Bytes(), &snap))
		require.Equal(t, nodes.RunPaused, snap.Status)
		require.NotEmpty(t, snap.Milestones)
		for _, m := range snap.Milestones {
			require.NotEqual(t, string(planner.StatusPending), m.Status, "milestone %s: the status its tasks give it now, not as planned", m.ID)
		}
		require.Len(t, snap.Escalations, 1)
		require.Equal(t, "T1", snap.Escalations[0].TaskID)
		require.Equal(t, nodes.ReasonMaxAttempts, snap.Escalations[0].Reason)
		require.Equal(t, "taskloom resume "+runID+" --repo "+repo, snap.Resume)
		// Both tasks had one attempt, T1's failing and T2's passing: that
		// is the attempt shown, not the one each would get next.
		for _, task := range snap.Tasks {
			require.Equal(t, 1, task.Attempt, "task %s", task.ID)
		}

		var detail struct {
			Status     string `json:"status"`
			Escalation *struct {
				TaskID string `json:"task_id"`
			} `json:"escalation"`
			Attempts []struct {
				Attempt      int    `json:"attempt"`
				Diff         string `json:"diff"`
				TestOutput   string `json:"test_output"`
				Tests        string `json:"tests"`
				Error        string `json:"error"`
				Conversation []struct {
					Messages []struct {
						Tool string `json:"tool"`
					} `json:"messages"`
				} `json:"conversation"`
			} `json:"attempts"`
		}
		res = do(t, h, "GET", "/api/runs/"+runID+"/tasks/T1", nil, nil)
		require.Equal(t, http.StatusOK, res.Code, res.Body.String())
		require.NoError(t, json.Unmarshal(res.Body.Bytes(), &detail))
		require.Equal(t, ui.StatusEscalated, detail.Status)
		require.NotNil(t, detail.Escalation)
		require.Len(t, detail.Attempts, 1)
		a := detail.Attempts[0]
		require.Equal(t, 1, a.Attempt)
		require.Contains(t, a.Diff, "+bad notes")
		require.Contains(t, a.TestOutput, "bad notes", "the verify command prints the files")
		require.Equal(t, "failed, exit code 1", a.Tests, "summed up as taskloom review sums it up")
		require.NotEmpty(t, a.Error)
		require.NotEmpty(t, a.Conversation, "the attempt's conversation from the histories")
		require.Equal(t, "write_to_file", a.Conversation[0].Messages[firstTool(a.Conversation[0].Messages)].Tool)

		require.Equal(t, http.StatusNotFound, do(t, h, "GET", "/api/runs/"+runID+"/tasks/T9", nil, nil).Code)
		require.Equal(t, http.StatusNotFound, do(t, h, "GET", "/api/runs/nope", nil, nil).Code)

		// Retry with a note, from the page.
		csrf := csrfOf(t, body)
		res = do(t, h, "POST", "/api/runs/"+runID+"/review",
			strings.NewReader(`{"task":"T1","action":"retry","note":"`+testkit.ReviewNote+`"}`), pageHeader(csrf))
		require.Equal(t, http.StatusOK, res.Code, res.Body.String())
		require.Contains(t, res.Body.String(), `"resume_now":true`)
		require.Equal(t, map[string]string{"T1": `{"action":"retry","note":"` + testkit.ReviewNote + `"}`}, recordedAnswers(t, dbURL, runID))
		// A second decision finds nothing left to decide.
		res = do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(`{"task":"T1","action":"skip"}`), pageHeader(csrf))
		require.Equal(t, http.StatusConflict, res.Code, res.Body.String())

		code, out, errOut := cli(t, "resume", runID, "--repo", repo)
		require.Equal(t, exitOK, code, "resume: stdout:\n%s\nstderr:\n%s", out, errOut)
		final := runState(t, dbURL, runID)
		t1, _ := final.State.Tasks.Get("T1")
		require.Equal(t, planner.StatusCompleted, t1.Status)
		require.Contains(t, t1.ImplementationNotes, "Reviewer note: "+testkit.ReviewNote)
		require.Equal(t, "good notes\n", mainFile(t, repo, "notes.txt"))
	})
}

func firstTool(msgs []struct {
	Tool string `json:"tool"`
}) int {
	for i, m := range msgs {
		if m.Tool != "" {
			return i
		}
	}
	return 0
}

// TestReviewRecordedAsCLI records the same decision on two identical runs,
// one from the page and one with taskloom review: the stores hold the same
// answer.
func TestReviewRecordedAsCLI(t *testing.T) {
	t.Parallel()
	dbURL := stores[0].newURL(t)
	_, fromPage := escalatedRun(t, dbURL)
	repo, fromCLI := escalatedRun(t, dbURL)
	h := newServer(t, dbURL, fromPage, nil).Handler()
	csrf := csrfOf(t, do(t, h, "GET", "/", nil, nil).Body.String())
	res := do(t, h, "POST", "/api/runs/"+fromPage+"/review", strings.NewReader(`{"task":"T1","action":"skip"}`), pageHeader(csrf))
	require.Equal(t, http.StatusOK, res.Code, res.Body.String())
	code, out, errOut := cli(t, "review", fromCLI, "--repo", repo, "--task", "T1", "--action", "skip")
	require.Equal(t, exitOK, code, "review: stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, map[string]string{"T1": `{"action":"skip"}`}, recordedAnswers(t, dbURL, fromPage))
	require.Equal(t, recordedAnswers(t, dbURL, fromCLI), recordedAnswers(t, dbURL, fromPage))

	// A body past the limit is refused as too large, not as bad JSON.
	big := do(t, h, "POST", "/api/runs/"+fromPage+"/review", strings.NewReader(`{"task":"T1","action":"retry","note":"`+strings.Repeat("x", 70<<10)+`"}`), pageHeader(csrf))
	require.Equal(t, http.StatusRequestEntityTooLarge, big.Code, big.Body.String())

	// Both pages show the decision until a resume acts on it.
	for _, runID := range []string{fromPage, fromCLI} {
		var snap struct {
			Decisions []map[string]string `json:"decisions"`
		}
		res := do(t, h, "GET", "/api/runs/"+runID, nil, nil)
		require.Equal(t, http.StatusOK, res.Code, res.Body.String())
		require.NoError(t, json.Unmarshal(res.Body.Bytes(), &snap))
		require.Equal(t, []map[string]string{{"task_id": "T1", "action": "skip"}}, snap.Decisions, runID)
	}
	require.Contains(t, do(t, h, "GET", "/", nil, nil).Body.String(), "skip, acted on when the run resumes")
}

// TestAccessRules: the Host check on loopback, the token off loopback,
// and the CSRF checks on POSTs, none of which records anything.
func TestAccessRules(t *testing.T) {
	t.Parallel()
	dbURL := stores[0].newURL(t)
	_, runID := escalatedRun(t, dbURL)

	t.Run("loopback", func(t *testing.T) {
		h := newServer(t, dbURL, runID, nil).Handler()
		require.Equal(t, http.StatusOK, do(t, h, "GET", "/", nil, nil).Code)
		// DNS rebinding
		require.Equal(t, http.StatusForbidden, doAt(t, h, "attacker.example:7070", "GET", "/", nil, nil).Code)
	})

	t.Run("remote token", func(t *testing.T) {
		s := newServer(t, dbURL, runID, &ui.Opts{Addr: "0.0.0.0:7070", AllowRemote: true})
		h := s.Handler()
		url := s.URL("192.0.2.1:7070")
		_, token, ok := strings.Cut(url, "?token=")
		require.True(t, ok, "the URL carries the token: %s", url)
		require.Len(t, token, 64)
		// Listening on every address, the URL names this machine, which
		// a browser elsewhere can open.
		host, err := os.Hostname()
		require.NoError(t, err)
		require.Equal(t, "http://"+host+":7070/?token="+token, s.URL("[::]:7070"))
		require.Equal(t, http.StatusOK, doAt(t, h, host+":7070", "GET", "/?token="+token, nil, nil).Code)
		remote := func(target string, header http.Header) *httptest.ResponseRecorder {
			return doAt(t, h, "192.0.2.1:7070", "GET", target, nil, header)
		}
		require.Equal(t, http.StatusUnauthorized, remote("/", nil).Code)
		require.Equal(t, http.StatusUnauthorized, remote("/api/runs/"+runID, nil).Code)
		require.Equal(t, http.StatusUnauthorized, remote("/?token=wrong", nil).Code)
		w := remote("/?token="+token, nil)
		require.Equal(t, http.StatusOK, w.Code)
		cookies := w.Result().Cookies()
		require.Len(t, cookies, 1)
		require.True(t, cookies[0].HttpOnly)
		require.Equal(t, http.StatusOK, remote("/api/runs/"+runID, http.Header{"Cookie": {cookies[0].Name + "=" + cookies[0].Value}}).Code)
		require.Equal(t, http.StatusUnauthorized, remote("/api/runs/"+runID, http.Header{"Cookie": {cookies[0].Name + "=x"}}).Code)
	})

	t.Run("csrf", func(t *testing.T) {
		h := newServer(t, dbURL, runID, nil).Handler()
		csrf := csrfOf(t, do(t, h, "GET", "/", nil, nil).Body.String())
		body := `{"task":"T1","action":"skip"}`
		for name, header := range map[string]http.Header{
			"no token":        {"Origin": {"http://127.0.0.1:7070"}, "Sec-Fetch-Site": {"same-origin"}},
			"wrong token":     {"Origin": {"http://127.0.0.1:7070"}, "X-Taskloom-Csrf": {strings.Repeat("0", 64)}},
			"other origin":    {"Origin": {"http://attacker.example"}, "X-Taskloom-Csrf": {csrf}},
			"no origin":       {"X-Taskloom-Csrf": {csrf}},
			"cross-site":      {"Origin": {"http://127.0.0.1:7070"}, "Sec-Fetch-Site": {"cross-site"}, "X-Taskloom-Csrf": {csrf}},
			"origin, no port": {"Origin": {"http://127.0.0.1"}, "X-Taskloom-Csrf": {csrf}},
		} {
			res := do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(body), header)
			require.Equal(t, http.StatusForbidden, res.Code, "%s: %s", name, res.Body.String())
		}
		// A state change is a POST: a GET of the review changes nothing.
		require.Equal(t, http.StatusMethodNotAllowed, do(t, h, "GET", "/api/runs/"+runID+"/review", nil, nil).Code)
		require.Empty(t, recordedAnswers(t, dbURL, runID), "a refused request records nothing")
		// A bad decision is refused by the same rules as taskloom review.
		res := do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(`{"task":"T1","action":"explode"}`), pageHeader(csrf))
		require.Equal(t, http.StatusBadRequest, res.Code, res.Body.String())
		res = do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(`{"task":"T1","action":"skip","note":"x"}`), pageHeader(csrf))
		require.Equal(t, http.StatusBadRequest, res.Code, res.Body.String())
		require.JSONEq(t, `{"error":"a note goes with retry only"}`, res.Body.String())
		res = do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(`{"task":"T2","action":"skip"}`), pageHeader(csrf))
		require.Equal(t, http.StatusNotFound, res.Code, res.Body.String())
		require.Empty(t, recordedAnswers(t, dbURL, runID))
	})
}

// sseUpdate is one update of the event stream.
type sseUpdate struct {
	Events []map[string]any `json:"events"`
	Run    struct {
		Status string `json:"status"`
		Tasks  []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"tasks"`
	} `json:"run"`
}

// readUpdates reads the stream's updates into a channel.
func readUpdates(t *testing.T, body io.Reader) <-chan sseUpdate {
	t.Helper()
	ch := make(chan sseUpdate, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var u sseUpdate
			if err := json.Unmarshal([]byte(data), &u); err != nil {
				t.Errorf("bad update %q: %v", data, err)
				return
			}
			ch <- u
		}
	}()
	return ch
}

// TestEventsFollowAnotherProcess: the stream shows a run that another
// process resumes, with the events run --json prints for it.
func TestEventsFollowAnotherProcess(t *testing.T) {
	t.Parallel()
	forEachEscalatedRun(t, func(t *testing.T, dbURL, repo, runID string) {
		srv := httptest.NewServer(newServer(t, dbURL, runID, &ui.Opts{PollInterval: 20 * time.Millisecond}).Handler())
		t.Cleanup(srv.Close)
		resp, err := http.Get(srv.URL + "/api/runs/" + runID + "/events")
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		updates := readUpdates(t, resp.Body)
		first := <-updates
		require.Equal(t, nodes.RunPaused, first.Run.Status)
		require.Empty(t, first.Events)

		code, out, errOut := cli(t, "review", runID, "--repo", repo, "--task", "T1", "--action", "retry", "--note", testkit.ReviewNote, "--resume")
		require.Equal(t, exitOK, code, "review: stdout:\n%s\nstderr:\n%s", out, errOut)

		seen := map[string]bool{}
		deadline := time.After(time.Minute)
		for !seen[nodes.EventRunFinished] {
			select {
			case u, ok := <-updates:
				require.True(t, ok, "the stream ended")
				for _, ev := range u.Events {
					typ, _ := ev["type"].(string)
					seen[typ] = true
					require.Equal(t, runID, ev["run_id"])
					if typ == nodes.EventRunFinished {
						require.Equal(t, nodes.RunCompleted, ev["status"])
						require.EqualValues(t, 0, ev["exit_code"])
						require.Equal(t, nodes.RunCompleted, u.Run.Status)
					}
					if typ == nodes.EventTaskIntegrated {
						require.Equal(t, "T1", ev["task_id"])
						require.EqualValues(t, 2, ev["attempt"])
					}
				}
			case <-deadline:
				t.Fatalf("no run_finished within a minute; seen %v", seen)
			}
		}
		require.True(t, seen[nodes.EventTaskIntegrated], "events: %v", seen)
		require.True(t, seen[nodes.EventTaskVerified], "events: %v", seen)
	})
}

// TestKilledRunReadsInterrupted: a run recorded as running whose process
// is gone (its lease released, or held by a dead process of this host)
// reads interrupted, with its resume command, as taskloom status says; a
// lease held elsewhere reads running.
func TestKilledRunReadsInterrupted(t *testing.T) {
	t.Parallel()
	forEachEscalatedRun(t, func(t *testing.T, dbURL, repo, runID string) {
		ctx := context.Background()
		d, st := openStore(t, dbURL)
		require.NoError(t, st.SetRunStatus(ctx, runID, nodes.RunRunning))
		h := newServer(t, dbURL, runID, nil).Handler()
		status := func() (run, listed string, resumeNow bool) {
			var snap struct {
				Status    string `json:"status"`
				ResumeNow bool   `json:"resume_now"`
			}
			res := do(t, h, "GET", "/api/runs/"+runID, nil, nil)
			require.Equal(t, http.StatusOK, res.Code, res.Body.String())
			require.NoError(t, json.Unmarshal(res.Body.Bytes(), &snap))
			var rows []struct {
				RunID  string `json:"run_id"`
				Status string `json:"status"`
			}
			res = do(t, h, "GET", "/api/runs", nil, nil)
			require.Equal(t, http.StatusOK, res.Code, res.Body.String())
			require.NoError(t, json.Unmarshal(res.Body.Bytes(), &rows))
			require.Len(t, rows, 1)
			return snap.Status, rows[0].Status, snap.ResumeNow
		}
		run, listed, resumeNow := status()
		require.Equal(t, nodes.RunInterrupted, run, "the lease was released")
		require.Equal(t, nodes.RunInterrupted, listed)
		require.True(t, resumeNow)
		page := do(t, h, "GET", "/", nil, nil)
		require.Contains(t, page.Body.String(), `<option value="`+runID+`" selected>`+runID+` · interrupted</option>`)

		host, err := os.Hostname()
		require.NoError(t, err)
		dead := exec.Command("true")
		require.NoError(t, dead.Run())
		lease, err := d.Acquire(ctx, runID, fmt.Sprintf("pid %d, host %s", dead.Process.Pid, host), time.Time{}, time.Hour)
		require.NoError(t, err)
		run, _, _ = status()
		require.Equal(t, nodes.RunInterrupted, run, "a dead process of this host holds nothing")
		require.NoError(t, d.Release(ctx, lease))

		lease, err = d.Acquire(ctx, runID, "pid 1, host elsewhere", time.Time{}, time.Hour)
		require.NoError(t, err)
		run, listed, resumeNow = status()
		require.Equal(t, nodes.RunRunning, run, "a live lease")
		require.Equal(t, nodes.RunRunning, listed)
		require.False(t, resumeNow)
		require.NoError(t, d.Release(ctx, lease))
	})
}

// TestAbortedRunSaysWhy: a run aborted from the page and resumed ends
// aborted, and the page's snapshot says why, as taskloom status does.
func TestAbortedRunSaysWhy(t *testing.T) {
	t.Parallel()
	dbURL := stores[0].newURL(t)
	repo, runID := escalatedRun(t, dbURL)
	h := newServer(t, dbURL, runID, nil).Handler()
	csrf := csrfOf(t, do(t, h, "GET", "/", nil, nil).Body.String())
	res := do(t, h, "POST", "/api/runs/"+runID+"/review", strings.NewReader(`{"task":"T1","action":"abort"}`), pageHeader(csrf))
	require.Equal(t, http.StatusOK, res.Code, res.Body.String())
	code, out, errOut := cli(t, "resume", runID, "--repo", repo)
	require.Equal(t, 4, code, "resume: stdout:\n%s\nstderr:\n%s", out, errOut)
	var snap struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	res = do(t, h, "GET", "/api/runs/"+runID, nil, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body.String())
	require.NoError(t, json.Unmarshal(res.Body.Bytes(), &snap))
	require.Equal(t, nodes.RunAborted, snap.Status)
	require.Equal(t, "aborted in the review of T1", snap.Reason)
	page := do(t, h, "GET", "/", nil, nil).Body.String()
	require.Contains(t, page, `<span id="run-reason" class="reason">aborted in the review of T1</span>`)
}

// TestAttemptInFlightShowsItsConversation: an attempt that has not ended
// (it runs, or its process was killed) has no record yet; the task's page
// shows its conversation so far and what it used.
func TestAttemptInFlightShowsItsConversation(t *testing.T) {
	t.Parallel()
	dbURL := stores[0].newURL(t)
	_, runID := escalatedRun(t, dbURL)
	_, st := openStore(t, dbURL)
	id := runID + "/T1/2"
	require.NoError(t, st.Histories(runID).Save(context.Background(), &agent.Record{
		Meta: agent.Metadata{ID: id, RootID: id, Mode: "code", Status: "running",
			Usage: agent.Usage{Calls: 3, InputTokens: 300, OutputTokens: 30}},
		UI: []agent.UIMessage{{Type: agent.UISay, Say: agent.SayText, Text: "Reading the notes file first."}},
	}))
	h := newServer(t, dbURL, runID, nil).Handler()
	res := do(t, h, "GET", "/api/runs/"+runID+"/tasks/T1", nil, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body.String())
	var d struct {
		Attempts []struct {
			Attempt    int  `json:"attempt"`
			InProgress bool `json:"in_progress"`
			Usage      struct {
				InputTokens int `json:"input_tokens"`
			} `json:"usage"`
			Conversation []struct {
				Messages []struct {
					Text string `json:"text"`
				} `json:"messages"`
			} `json:"conversation"`
		} `json:"attempts"`
	}
	require.NoError(t, json.Unmarshal(res.Body.Bytes(), &d))
	require.Len(t, d.Attempts, 2)
	require.False(t, d.Attempts[0].InProgress)
	last := d.Attempts[1]
	require.Equal(t, 2, last.Attempt)
	require.True(t, last.InProgress)
	require.Equal(t, 300, last.Usage.InputTokens)
	require.Len(t, last.Conversation, 1)
	require.Equal(t, "Reading the notes file first.", last.Conversation[0].Messages[0].Text)
}
