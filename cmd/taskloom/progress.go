package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/worktree"
)

// progress shows a run as it goes: a live table on a terminal, plain lines
// otherwise, one JSON object per event with --json.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	json   bool
	live   bool
	runID  string
	tasks  map[string]planner.Task
	order  []string
	log    []nodes.Entry
	drawn  int // lines of the last live table
	status string
	// model is the run's model spec; it says whether usage has a cost.
	model string
	// wait is the last wait for the provider, shown in the live view.
	wait string
}

func newProgress(w io.Writer, asJSON bool, runID string) *progress {
	return &progress{w: w, json: asJSON, live: !asJSON && isTerminal(w), runID: runID, tasks: map[string]planner.Task{}}
}

// isTerminal reports whether w is a terminal: a character device other
// than /dev/null.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isCharDevice(f) && os.Getenv("TERM") != "dumb"
}

func (p *progress) emitJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	fmt.Fprintf(p.w, "%s\n", b)
}

func (p *progress) start(product, repo, branch string, meta runMeta) {
	if p.json {
		p.emitJSON(map[string]any{"kind": "run_start", "run_id": p.runID, "product": product, "repo": repo,
			"target_branch": branch, "workers": meta.Workers})
		return
	}
	fmt.Fprintf(p.w, "run %s\n", p.runID)
	fmt.Fprintf(p.w, "product %s, repo %s, branch %s, %d worker(s)\n", product, repo, branch, meta.Workers)
}

// providerWait shows a wait for the model provider: a provider_wait
// event with --json, else a line (in the live view, a row of the table).
func (p *progress) providerWait(w llm.WaitInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	secs := w.Wait.Seconds()
	if p.json {
		p.emitJSON(map[string]any{"ts": time.Now().UTC(), "run_id": p.runID, "type": "provider_wait", "reason": w.Reason,
			"seconds": secs, "provider": w.Provider, "status": w.Status, "retry": w.Retry})
		return
	}
	why := w.Reason
	if w.Status > 0 {
		why += fmt.Sprintf(", HTTP %d", w.Status)
	}
	line := fmt.Sprintf("provider %s: %s; waiting %s", w.Provider, why, shortDuration(w.Wait.Round(100*time.Millisecond)))
	if w.Retry > 0 {
		line += fmt.Sprintf(" before retry %d", w.Retry)
	}
	if p.live {
		p.wait = line
		p.draw()
		return
	}
	fmt.Fprintf(p.w, "%s %s\n", time.Now().Format("15:04:05"), line)
}

// usageReport is a run's usage as status --json, the usage event and the
// run summary show it. CostUSD is null when the model has no price (see
// llm.PriceOf): no cost rather than a wrong one.
type usageReport struct {
	InputTokens      int      `json:"input_tokens"`
	OutputTokens     int      `json:"output_tokens"`
	CacheReadTokens  int      `json:"cache_read_tokens"`
	CacheWriteTokens int      `json:"cache_write_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	Estimated        bool     `json:"estimated"`
}

func newUsageReport(u llm.Usage, model string) usageReport {
	r := usageReport{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, Estimated: u.Estimated}
	if _, ok := llm.PriceOf(model); ok {
		cost := u.CostUSD
		r.CostUSD = &cost
	}
	return r
}

// String is the usage on one line.
func (r usageReport) String() string {
	s := fmt.Sprintf("%d input, %d output, %d cache read, %d cache write tokens", r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens)
	if r.Estimated {
		s += " (partly estimated: a provider reported no usage)"
	}
	if r.CostUSD != nil {
		return s + fmt.Sprintf(", $%.4f", *r.CostUSD)
	}
	return s + ", no cost (the model is not in the price table)"
}

// seed shows the tasks a resumed run already has.
func (p *progress) seed(tasks []planner.Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range tasks {
		if _, seen := p.tasks[t.ID]; !seen {
			p.order = append(p.order, t.ID)
		}
		p.tasks[t.ID] = t
	}
}

func (p *progress) resume(branch string) {
	if p.json {
		p.emitJSON(map[string]any{"kind": "run_resume", "run_id": p.runID, "target_branch": branch})
		return
	}
	fmt.Fprintf(p.w, "run %s (resumed)\n", p.runID)
}

// event is the graph's event sink.
func (p *progress) event(e graph.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		p.emitJSON(e)
		return
	}
	switch e.Kind {
	case graph.EventUpdate:
		u, ok := e.Update.(nodes.State)
		if !ok {
			return
		}
		for _, id := range u.Tasks.Keys() {
			t, _ := u.Tasks.Get(id)
			if _, seen := p.tasks[id]; !seen {
				p.order = append(p.order, id)
			}
			p.tasks[id] = t
		}
		for _, en := range u.Log.Items() {
			p.log = append(p.log, en)
			if !p.live {
				fmt.Fprintf(p.w, "%s %s\n", en.Time.Format("15:04:05"), en.Text)
			}
		}
	case graph.EventNodeStart:
		p.status = e.Node
		if !p.live {
			return
		}
	case graph.EventError:
		if !p.live {
			fmt.Fprintf(p.w, "error in step %d: %s\n", e.Step, firstLineOf(e.Error))
		}
	case graph.EventInterrupt:
		if !p.live {
			fmt.Fprintf(p.w, "%d task(s) need a human review\n", len(e.Interrupts))
		}
	}
	if p.live && (e.Kind == graph.EventUpdate || e.Kind == graph.EventNodeStart) {
		p.draw()
	}
}

// draw redraws the live table in place.
func (p *progress) draw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", p.drawn)
	}
	lines := p.table()
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	p.drawn = len(lines)
	io.WriteString(p.w, b.String())
}

func (p *progress) table() []string {
	counts := map[planner.Status]int{}
	var lines []string
	lines = append(lines, fmt.Sprintf("%-10s %-12s %-8s %s", "TASK", "STATUS", "TRIES", "TITLE"))
	for _, id := range p.order {
		t := p.tasks[id]
		counts[t.Status]++
		title := t.Title
		if len(title) > 50 {
			title = title[:49] + "…"
		}
		// Attempts counts failed tries; the one running or passed counts too.
		tries := t.Attempts
		if t.Status == planner.StatusInProgress || t.Status == planner.StatusCompleted {
			tries++
		}
		lines = append(lines, fmt.Sprintf("%-10s %-12s %-8s %s", id, t.Status, fmt.Sprintf("%d/%d", tries, t.MaxAttempts), title))
	}
	done := counts[planner.StatusCompleted] // as the summary counts it
	pct := 0
	if len(p.order) > 0 {
		pct = done * 100 / len(p.order)
	}
	lines = append(lines, fmt.Sprintf("%d%% done · now: %s", pct, p.status))
	if p.wait != "" {
		lines = append(lines, "  "+p.wait)
	}
	start := max(0, len(p.log)-5)
	for _, en := range p.log[start:] {
		lines = append(lines, "  "+firstLineOf(en.Text))
	}
	return lines
}

// finish prints how the call ended and returns the error that carries the
// exit code (SPEC §1).
func (p *progress) finish(res graph.Result[nodes.State], err error) error {
	status := nodes.StatusOf(res, err)
	if err != nil && res.Step < 0 && len(res.Next) == 0 && res.State.RunID.Get() == "" {
		status = ""
	}
	tasks := res.State.Tasks.Values()
	summary := summarize(tasks)
	usage := newUsageReport(nodes.RunUsage(res.State), p.model)
	if p.json {
		p.emitJSON(map[string]any{"ts": time.Now().UTC(), "run_id": p.runID, "type": "usage", "usage": usage})
		out := map[string]any{"kind": "run_end", "run_id": p.runID, "status": status, "tasks": summary,
			"no_change": append([]string{}, nodes.NoChangeTasks(res.State)...), "usage": usage}
		if err != nil {
			out["error"] = err.Error()
		}
		p.emitJSON(out)
	} else {
		fmt.Fprintf(p.w, "run %s: %s (%s of %d tasks done)\n", p.runID, orDash(status), summary["progress"], len(tasks))
		fmt.Fprintf(p.w, "usage: %s\n", usage)
		if ids := nodes.NoChangeTasks(res.State); len(ids) > 0 {
			fmt.Fprintf(p.w, "no_change: true for %s (completed: the tests passed, but the worker changed nothing)\n", strings.Join(ids, ", "))
		}
	}
	if err != nil {
		if fault := storeFault(p.runID, err); fault != nil {
			return fault
		}
		var reset *worktree.ResetError
		if errors.As(err, &reset) {
			return reset // one line, without the nodes it went through
		}
		if errors.Is(err, graph.ErrStepLimit) {
			return fmt.Errorf("%w; resume it with: taskloom resume %s", err, p.runID)
		}
		return err
	}
	switch status {
	case nodes.RunCompleted:
		return nil
	case nodes.RunInterrupted:
		if !p.json {
			fmt.Fprintf(p.w, "paused for human review: taskloom review %s, then taskloom resume %s\n", p.runID, p.runID)
		}
		return withCode(exitReview, nil)
	default:
		return withCode(exitFailed, nil)
	}
}

func summarize(tasks []planner.Task) map[string]any {
	out := map[string]any{"total": len(tasks)}
	for _, s := range []planner.Status{planner.StatusPending, planner.StatusInProgress, planner.StatusCompleted, planner.StatusFailed, planner.StatusBlocked, planner.StatusSkipped} {
		out[string(s)] = 0
	}
	done := 0
	for _, t := range tasks {
		out[string(t.Status)] = out[string(t.Status)].(int) + 1
		if t.Status == planner.StatusCompleted {
			done++
		}
	}
	pct := 0
	if len(tasks) > 0 {
		pct = done * 100 / len(tasks)
	}
	out["progress"] = fmt.Sprintf("%d%%", pct)
	return out
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
