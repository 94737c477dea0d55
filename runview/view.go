package runview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// Opts configures a View.
type Opts struct {
	RunID string
	// Model is the run's model spec; it says whether usage has a cost.
	Model   string
	Workers int
	// JSON prints one nodes.RunEvent per line.
	JSON bool
	// Live draws the live view: w is a terminal (and TERM is not dumb).
	Live bool
	// NoColor draws the live view without colour (NO_COLOR).
	NoColor bool
	// NowFunc reads the clock; nil means time.Now.
	NowFunc func() time.Time
	// NextFlags is appended to the taskloom commands the view prints, so
	// that they find the run's store: " --db URL", or "".
	NextFlags string
}

// View shows one run as it goes. Its methods are safe for concurrent use.
type View struct {
	mu   sync.Mutex
	w    io.Writer
	opts Opts
	tr   nodes.Tracker
	// work is what each running task is doing, by task ID.
	work map[string]*work
	// base is the usage recorded before this process (a resumed run) and
	// by the breakdown; spent adds what the workers' model calls used since.
	base, spent agent.Usage
	log         []string
	eta         string
	etaDirty    bool
	milestones  []string // the order of the ETA's schedule
	live        *liveView
	// landed are the tasks integrated as the run stopped, not recorded
	// yet, each with its commit.
	landed map[string]string
}

// work is what one running task's attempt is doing.
type work struct {
	activity string
	usage    agent.Usage
	// waitUntil ends a wait for the provider, which the live view counts
	// down; waitReason says why it waits.
	waitUntil  time.Time
	waitReason string
	// modelSince is when the model call in flight started, zero when
	// none is.
	modelSince time.Time
}

// slowModelCall is how long a model call runs before the row says that
// the worker waits for it rather than show the tool before it.
const slowModelCall = 2 * time.Second

// activityNow is what w shows at now: a wait for the provider counts down.
func (w *work) activityNow(now time.Time) string {
	if left := w.waitUntil.Sub(now); left > 0 {
		return nodes.WaitSummary(left, w.waitReason)
	}
	if !w.modelSince.IsZero() && (now.Sub(w.modelSince) >= slowModelCall || w.activity == "") {
		return agent.WaitingForModel
	}
	return w.activity
}

// New returns a view that writes to w.
func New(w io.Writer, opts Opts) *View {
	v := &View{w: w, opts: opts, work: map[string]*work{}}
	v.tr.RunID, v.tr.NowFunc = opts.RunID, opts.NowFunc
	return v
}

func (v *View) now() time.Time {
	if v.opts.NowFunc != nil {
		return v.opts.NowFunc()
	}
	return time.Now()
}

// emit prints events as JSON lines; the caller holds mu.
func (v *View) emit(evs ...nodes.RunEvent) {
	if !v.opts.JSON {
		return
	}
	for _, e := range evs {
		if b, err := json.Marshal(e); err == nil {
			fmt.Fprintf(v.w, "%s\n", b)
		}
	}
}

// plain prints a line with the time in front, unless the view is JSON or
// live; the caller holds mu.
func (v *View) plain(format string, args ...any) {
	if v.opts.JSON || v.live != nil {
		return
	}
	fmt.Fprintf(v.w, "%s %s\n", v.now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Started shows the run's start: its ID first, with how it started
// ("resumed", "forked from …") when it is not new, then its target branch
// and workers, unless the run has ended already ("ended …").
func (v *View) Started(product, repo, branch, how string) {
	v.mu.Lock()
	ev := v.tr.Event(nodes.EventRunStarted)
	ev.TargetBranch, ev.Workers = branch, v.opts.Workers
	v.emit(ev)
	if !v.opts.JSON {
		line := "run " + v.opts.RunID
		if how != "" {
			line += " (" + how + ")"
		}
		v.println(line)
		if product != "" {
			v.println(fmt.Sprintf("product %s, repo %s", product, repo))
		}
		workers := fmt.Sprintf("%d worker(s)", v.opts.Workers)
		if v.opts.Workers == 0 {
			workers = "the queue's taskloom worker processes"
		}
		if !strings.HasPrefix(how, "ended ") {
			v.println(fmt.Sprintf("integrating into branch %s with %s", branch, workers))
		}
	}
	if v.opts.Live && !v.opts.JSON && v.live == nil {
		// The live view draws below the lines printed so far.
		v.live = startLive(v)
	}
	v.mu.Unlock()
	v.refresh()
}

// println prints a line as it is, cut to the width on a terminal; the
// caller holds mu.
func (v *View) println(line string) {
	if v.opts.Live && !v.opts.JSON {
		line = fit(line, v.width())
	}
	fmt.Fprintln(v.w, line)
}

// printCommand prints a line that holds a command to copy: whole, even
// on a terminal narrower than it, where it wraps rather than lose its end.
func (v *View) printCommand(line string) {
	fmt.Fprintln(v.w, line)
}

// Seed shows a resumed run's stored state.
func (v *View) Seed(s nodes.State) {
	v.mu.Lock()
	v.base = agentUsage(nodes.RunUsage(s))
	v.emit(v.tr.Seed(s)...)
	v.setMilestones(s)
	v.etaDirty = true
	v.mu.Unlock()
	v.refresh()
}

// setMilestones keeps the milestones' order that u sets; the caller holds
// mu.
func (v *View) setMilestones(u nodes.State) {
	if u.Milestones.IsSet() {
		v.milestones = v.milestones[:0]
		for _, m := range u.Milestones.Get() {
			v.milestones = append(v.milestones, m.ID)
		}
	}
}

func agentUsage(u llm.Usage) agent.Usage {
	return agent.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, CostUSD: u.CostUSD, Estimated: u.Estimated, Unreported: u.Unreported}
}

// Graph is the graph's event sink.
func (v *View) Graph(e graph.Event) {
	v.mu.Lock()
	evs := v.tr.Graph(e)
	v.emit(evs...)
	for _, ev := range evs {
		if ev.Type == nodes.EventTaskStarted {
			v.work[ev.TaskID] = &work{activity: "starting"}
		}
	}
	switch e.Kind {
	case graph.EventUpdate:
		if u, ok := e.Update.(nodes.State); ok {
			if u.PlanUsage.IsSet() {
				v.base.Add(agentUsage(u.PlanUsage.Get()))
			}
			for _, en := range u.Log.Items() {
				v.addLog(en)
			}
			if u.Tasks.Len() > 0 {
				v.etaDirty = true
			}
			v.setMilestones(u)
		}
	case graph.EventError:
		// A run stopped by Ctrl-C ends its steps with the cancelled
		// context: the stop, which the end of the run reports, is no
		// error.
		if !errors.Is(e.Err, context.Canceled) {
			v.plain("error in step %d: %s", e.Step, clip.Line(e.Error, 0))
		}
	case graph.EventInterrupt:
		v.plain("%d task(s) need a human review", len(e.Interrupts))
	}
	v.mu.Unlock()
	v.refresh()
}

// addLog keeps a log entry for the live view, or prints it as a plain
// line; the caller holds mu.
func (v *View) addLog(en nodes.Entry) {
	if v.live == nil {
		if !v.opts.JSON {
			fmt.Fprintf(v.w, "%s %s\n", en.Time.Format("15:04:05"), en.Text)
		}
		return
	}
	v.log = append(v.log, en.Time.Format("15:04:05")+" "+clip.Line(en.Text, 0))
	if len(v.log) > logLines {
		v.log = v.log[len(v.log)-logLines:]
	}
}

// logLines is how many of the log's last lines the live view shows.
const logLines = 4

// Activity shows what an attempt is doing.
func (v *View) Activity(a nodes.Activity) {
	v.mu.Lock()
	w := v.work[a.TaskID]
	if w == nil {
		w = &work{}
		v.work[a.TaskID] = w
	}
	if a.Tool == "model" {
		w.modelSince = time.Time{} // it replied: its tool calls follow
		if a.Summary == agent.WaitingForModel {
			w.modelSince = v.now()
		}
		w.usage.Add(a.Usage)
		v.spent.Add(a.Usage)
	} else {
		w.waitUntil, w.modelSince = time.Time{}, time.Time{}
		if a.Tool == nodes.ActivityWait {
			// The model call is tried again once the wait is over.
			w.waitUntil, w.waitReason, w.modelSince = v.now().Add(a.Wait), a.Reason, v.now()
		}
		before := w.activity
		w.activity = strings.TrimSpace(a.Tool + " " + a.Summary)
		switch a.Tool {
		case nodes.ActivityTests, "worker":
			w.activity = a.Summary
		case nodes.ActivityWait:
			// The countdown shows the wait, and the row the model call
			// after it: the tool before them stays.
			w.activity = before
		}
		if a.Worker != "" {
			w.activity = a.Worker + ": " + w.activity
		}
		if a.Tool == "queue" && v.live == nil && !v.opts.JSON {
			// The queue's news (no worker has taken the attempt yet, or
			// a dead worker's attempt went back) is rare and matters to
			// someone reading plain lines.
			v.plain("%s attempt %d: %s", a.TaskID, a.Attempt, a.Summary)
		}
		if a.Tool != nodes.ActivityWait {
			ev := v.tr.Event(nodes.EventWorkerActivity)
			ev.TaskID, ev.Attempt, ev.Tool, ev.Summary, ev.Host = a.TaskID, a.Attempt, a.Tool, a.Summary, a.Worker
			v.emit(ev)
		}
	}
	v.mu.Unlock()
	v.refresh()
}

// ProviderWait shows a wait for the model provider: a provider_wait event
// with JSON, else a line (in the live view, a line of its log).
func (v *View) ProviderWait(w llm.WaitInfo) {
	v.mu.Lock()
	ev := v.tr.Event(nodes.EventProviderWait)
	ev.Reason, ev.Seconds = w.Reason, w.Wait.Seconds()
	v.emit(ev)
	why := w.Reason
	if w.Status > 0 {
		why += fmt.Sprintf(", HTTP %d", w.Status)
	}
	line := fmt.Sprintf("provider %s: %s; waiting %s", w.Provider, why, w.Wait.Round(100*time.Millisecond))
	if w.Retry > 0 {
		line += fmt.Sprintf(" before retry %d", w.Retry)
	}
	if v.live != nil {
		v.addLog(nodes.Entry{Time: v.now(), Text: line})
	} else {
		v.plain("%s", line)
	}
	v.mu.Unlock()
	v.refresh()
}

// width is the terminal's width; the caller holds mu.
func (v *View) width() int {
	if v.live != nil {
		return v.live.width()
	}
	if f, ok := v.w.(*os.File); ok {
		if w, _, err := term.GetSize(f.Fd()); err == nil && w > 0 {
			return w
		}
	}
	return defaultWidth
}

func (v *View) refresh() {
	if v.live != nil {
		v.live.refresh()
	}
}

// estimate returns the ETA of the tasks left, from the schedule estimate;
// the caller holds mu.
func (v *View) estimate() string {
	if !v.etaDirty {
		return v.eta
	}
	v.etaDirty = false
	var left []planner.Task
	for _, t := range v.tr.Tasks() {
		switch t.Status {
		case planner.StatusSkipped, planner.StatusBlocked, planner.StatusFailed:
			continue
		}
		left = append(left, t)
	}
	s := scheduler.Simulate(left, max(v.opts.Workers, 1), &scheduler.Opts{MilestoneOrder: v.milestones})
	v.eta = ""
	if s.MakespanMinutes > 0 {
		v.eta = "ETA ~" + minutes(s.MakespanMinutes)
	}
	return v.eta
}

func minutes(m float64) string {
	d := time.Duration(m * float64(time.Minute)).Round(time.Minute)
	if d < time.Minute {
		return "<1m"
	}
	h, mm := int(d.Hours()), int(d.Minutes())%60
	if h > 0 {
		return fmt.Sprintf("%dh%02dm", h, mm)
	}
	return fmt.Sprintf("%dm", mm)
}
