package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

//go:embed assets
var assets embed.FS

// errNotFound marks a run or a task that does not exist: 404.
var errNotFound = errors.New("not found")

// Opts configures a Server.
type Opts struct {
	// Saver holds the runs' checkpoints; the review decisions are
	// recorded through it.
	Saver checkpoint.Saver
	// Store holds the runs' records and histories.
	Store *nodes.Store
	// RunID is the run the page shows first.
	RunID string
	// Addr is where the server listens (HOST:PORT); empty means
	// 127.0.0.1:7070.
	Addr string
	// AllowRemote permits a non-loopback Addr; every request must then
	// carry the access token.
	AllowRemote bool
	// ResumeFlags are the flags the resume command shown on the page
	// needs to find the run's store, such as --repo DIR or --db URL.
	ResumeFlags []string
	// PollInterval is how often a live page rereads the run; zero means
	// 500ms.
	PollInterval time.Duration
	// WorkersFunc, when set, completes a run's workers with what the
	// store knows beyond the checkpoints: the process that holds each
	// queued attempt and its activity.
	WorkersFunc func(ctx context.Context, runID string, ws []nodes.WorkerStatus) error
	// NowFunc reads the clock; nil means time.Now.
	NowFunc func() time.Time
	Logger  *slog.Logger
}

// DefaultAddr is where taskloom ui listens without --addr.
const DefaultAddr = "127.0.0.1:7070"

// Server serves the page of a store's runs.
type Server struct {
	store       *nodes.Store
	saver       checkpoint.Saver
	graph       *graph.Runnable[nodes.State]
	runID       string
	resumeFlags []string
	poll        time.Duration
	workers     func(ctx context.Context, runID string, ws []nodes.WorkerStatus) error
	now         func() time.Time
	log         *slog.Logger
	page        *template.Template
	// remote: the server listens off loopback; token then guards every
	// request. csrf guards the POSTs.
	remote bool
	token  string
	csrf   string

	mu      sync.Mutex
	layouts map[string]cachedLayout
}

type cachedLayout struct {
	key string
	lay Layout
}

// New returns a server for opts. It checks the address (CheckAddr) but
// does not listen yet.
func New(opts Opts) (*Server, error) {
	if opts.Saver == nil || opts.Store == nil {
		return nil, errors.New("ui: Saver and Store are required")
	}
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if err := CheckAddr(opts.Addr, opts.AllowRemote); err != nil {
		return nil, err
	}
	g, err := (&nodes.Runner{Pipeline: &nodes.Pipeline{}, Saver: opts.Saver}).Runnable()
	if err != nil {
		return nil, err
	}
	page, err := template.New("page.html").Funcs(template.FuncMap{
		"statusText": func(s string) string { return strings.ReplaceAll(s, "_", " ") },
		"firstLine":  func(s string) string { line, _, _ := strings.Cut(s, "\n"); return line },
		"short": func(s string, n int) string {
			if r := []rune(s); len(r) > n {
				return string(r[:n-1]) + "…"
			}
			return s
		},
		"add": func(a, b int) int { return a + b },
	}).ParseFS(assets, "assets/page.html")
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(opts.Addr)
	s := &Server{store: opts.Store, saver: opts.Saver, graph: g, runID: opts.RunID, resumeFlags: opts.ResumeFlags, poll: opts.PollInterval, workers: opts.WorkersFunc,
		now: opts.NowFunc, log: opts.Logger, page: page, remote: !llm.IsLoopback(host), csrf: newToken(), layouts: map[string]cachedLayout{}}
	if s.poll <= 0 {
		s.poll = 500 * time.Millisecond
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.remote {
		s.token = newToken()
	}
	return s, nil
}

// Serve listens on opts.Addr and serves until ctx ends. ready is called
// with the page's URL once the server listens; off loopback the URL
// carries the access token.
func Serve(ctx context.Context, opts Opts, ready func(url string)) error {
	s, err := New(opts)
	if err != nil {
		return err
	}
	addr := opts.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	if ready != nil {
		ready(s.URL(ln.Addr().String()))
	}
	return s.Serve(ctx, ln)
}

// URL is the page's address when the server listens on addr. On every
// address at once ("[::]:7070"), it names this machine, which a browser
// elsewhere can reach.
func (s *Server) URL(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if name, err := os.Hostname(); err == nil && name != "" {
				addr = net.JoinHostPort(name, port)
			}
		}
	}
	u := "http://" + addr + "/"
	if s.token != "" {
		u += "?" + tokenParam + "=" + s.token
	}
	return u
}

// Serve serves on ln until ctx ends, then shuts down.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler returns the server's routes behind its access rules.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix("/assets/", http.FileServerFS(static))
	mux.HandleFunc("GET /assets/{name}", func(w http.ResponseWriter, r *http.Request) {
		// The page's files, one by one: no listing, and not the page's
		// template, which only the server renders.
		if name := r.PathValue("name"); name == "page.html" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /{$}", s.handlePage)
	mux.HandleFunc("GET /runs/{run}", s.handlePage)
	mux.HandleFunc("GET /runs/{run}/graph", s.handleGraph)
	mux.HandleFunc("GET /api/runs", s.handleRuns)
	mux.HandleFunc("GET /api/runs/{run}", s.handleRun)
	mux.HandleFunc("GET /api/runs/{run}/events", s.handleEvents)
	mux.HandleFunc("GET /api/runs/{run}/tasks/{task}", s.handleTask)
	mux.HandleFunc("POST /api/runs/{run}/review", s.handleReview)
	return s.guard(mux)
}

// runOf is the run a request names, or the server's own.
func (s *Server) runOf(r *http.Request) string {
	if id := r.PathValue("run"); id != "" {
		return id
	}
	return s.runID
}

// fail answers an API request with err's status and message as JSON.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := s.statusOf(r, err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// failPage answers a page request with err's status and message as a
// page, with a way back to the list of runs.
func (s *Server) failPage(w http.ResponseWriter, r *http.Request, err error) {
	code := s.statusOf(r, err)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	msg := template.HTMLEscapeString(err.Error())
	fmt.Fprintf(w, "<!doctype html><meta charset=\"utf-8\"><title>taskloom ui: %d</title><p>%s</p><p><a href=\"/\">All runs</a></p>\n", code, msg)
}

// statusOf is the HTTP status of err; a server error is logged.
func (s *Server) statusOf(r *http.Request, err error) int {
	code := http.StatusInternalServerError
	var re *reviewError
	switch {
	case errors.Is(err, errNotFound):
		code = http.StatusNotFound
	case errors.Is(err, checkpoint.ErrThreadBusy):
		// Another process drives the run: the message names it.
		code = http.StatusConflict
	case errors.As(err, &re):
		code = re.code
	}
	if code == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "ui request failed", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	}
	return code
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// layout returns the layout of a run's plan, computed again only when the
// plan's shape changes.
func (s *Server) layout(runID string, tasks []planner.Task, milestones []planner.Milestone, workers int) Layout {
	key, _ := json.Marshal(struct {
		T [][]string
		M []planner.Milestone
		W int
	}{shape(tasks), milestones, workers})
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.layouts[runID]; ok && c.key == string(key) {
		return c.lay
	}
	lay := LayoutPlan(tasks, milestones, workers)
	s.layouts[runID] = cachedLayout{key: string(key), lay: lay}
	return lay
}

// shape is what a layout depends on: each task's ID, title, milestone,
// estimate and dependencies.
func shape(tasks []planner.Task) [][]string {
	out := make([][]string, len(tasks))
	for i, t := range tasks {
		out[i] = append([]string{t.ID, t.Title, t.MilestoneID, fmt.Sprint(t.EstimatedMinutes)}, t.Dependencies...)
	}
	return out
}

// pageData is what the page template renders.
type pageData struct {
	Snap     *snapshot
	Layout   Layout
	Status   map[string]taskView
	Statuses []string
	CSRF     string
	Runs     []nodes.Run
}

func (s *Server) pageData(r *http.Request) (*pageData, error) {
	runID := s.runOf(r)
	if runID == "" {
		return nil, fmt.Errorf("no run to show: %w", errNotFound)
	}
	snap, err := s.load(r.Context(), runID)
	if err != nil {
		return nil, err
	}
	var meta runMeta
	if run, err := s.store.Run(r.Context(), runID); err == nil {
		_ = json.Unmarshal(run.Meta, &meta)
	}
	d := &pageData{Snap: snap, Status: map[string]taskView{}, Statuses: statusOrder, CSRF: s.csrf,
		Layout: s.layout(runID, snap.state.Tasks.Values(), snap.state.Milestones.Get(), meta.Workers)}
	for _, t := range snap.Tasks {
		d.Status[t.ID] = t
	}
	return d, nil
}

func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	d, err := s.pageData(r)
	if err != nil {
		s.failPage(w, r, err)
		return
	}
	if d.Runs, err = s.runs(r.Context()); err != nil {
		s.failPage(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.page.ExecuteTemplate(w, "page", d); err != nil {
		s.log.ErrorContext(r.Context(), "render the page", slog.String("error", err.Error()))
	}
}

// handleGraph renders the graph alone, for a page whose plan changed.
func (s *Server) handleGraph(w http.ResponseWriter, r *http.Request) {
	d, err := s.pageData(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.page.ExecuteTemplate(w, "graph", d); err != nil {
		s.log.ErrorContext(r.Context(), "render the graph", slog.String("error", err.Error()))
	}
}

// runRow is a run as the runs list shows it.
type runRow struct {
	RunID     string    `json:"run_id"`
	Product   string    `json:"product"`
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at"`
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.runs(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows := make([]runRow, len(runs))
	for i, run := range runs {
		rows[i] = runRow{RunID: run.ID, Product: run.ProductPath, Status: run.Status, StartedAt: run.CreatedAt}
	}
	writeJSON(w, rows)
}

// runs lists the store's runs with their live status: a run whose process
// was killed reads interrupted, as taskloom runs says, not running.
func (s *Server) runs(ctx context.Context) ([]nodes.Run, error) {
	runs, err := s.store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	threads, err := s.threads(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	for i := range runs {
		th, ok := threads[runs[i].ID]
		runs[i].Status = nodes.LiveStatus(runs[i], th, ok, now)
	}
	return runs, nil
}

// liveStatus is run's status as its thread's lease shows it.
func (s *Server) liveStatus(ctx context.Context, run nodes.Run) (string, error) {
	threads, err := s.threads(ctx)
	if err != nil {
		return "", err
	}
	th, ok := threads[run.ID]
	return nodes.LiveStatus(run, th, ok, s.now()), nil
}

func (s *Server) threads(ctx context.Context) (map[string]checkpoint.ThreadInfo, error) {
	infos, err := s.saver.Threads(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the runs' leases: %w", err)
	}
	byID := make(map[string]checkpoint.ThreadInfo, len(infos))
	for _, th := range infos {
		byID[th.ThreadID] = th
	}
	return byID, nil
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	snap, err := s.load(r.Context(), s.runOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, snap)
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	snap, err := s.load(r.Context(), s.runOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.detail(r.Context(), snap, r.PathValue("task"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, d)
}

// update is one message of the event stream: the events since the last
// one, as run --json prints them, and the run as it is now.
type update struct {
	Events []nodes.RunEvent `json:"events"`
	Run    *snapshot        `json:"run"`
}

// handleEvents streams a run's updates as Server-Sent Events: the run as
// it is at once, then an update whenever a poll of the store finds it
// changed, until the client goes.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, errors.New("streaming is not supported by this connection"))
		return
	}
	ctx, runID := r.Context(), s.runOf(r)
	snap, err := s.load(ctx, runID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	f := newFollower(runID, s.now)
	f.next(snap)
	last, err := s.send(w, update{Events: []nodes.RunEvent{}, Run: snap}, nil)
	if err != nil {
		return
	}
	flusher.Flush()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
			continue
		case <-tick.C:
		}
		snap, err := s.load(ctx, runID)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "ui poll", slog.String("run_id", runID), slog.String("error", err.Error()))
			}
			continue
		}
		events := f.next(snap)
		sent, err := s.send(w, update{Events: nonNil(events), Run: snap}, last)
		if err != nil {
			return
		}
		if sent != nil {
			last = sent
			flusher.Flush()
		}
	}
}

// send writes u as an "update" event unless it says nothing new since the
// message last (its run unchanged, no events). It returns the run's JSON
// when it wrote.
func (s *Server) send(w http.ResponseWriter, u update, last []byte) ([]byte, error) {
	run, err := json.Marshal(u.Run)
	if err != nil {
		return nil, err
	}
	if len(u.Events) == 0 && string(run) == string(last) {
		return nil, nil
	}
	events, err := json.Marshal(u.Events)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(w, "event: update\ndata: {\"events\":%s,\"run\":%s}\n\n", events, run)
	return run, err
}
