package runview

import (
	"fmt"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
)

// liveView draws a View in place with Bubble Tea.
type liveView struct {
	v    *View
	prog *tea.Program
	done chan struct{}
	mu   sync.Mutex
	w    int // the terminal's width as Bubble Tea last heard it
	// initial is the width until then.
	initial int
	st      styles
}

type styles struct {
	head, dim, ok, bad, task lipgloss.Style
}

// defaultWidth is the width assumed until the terminal tells its own.
const defaultWidth = 80

type refreshMsg struct{}

type tickMsg struct{}

// model is the Bubble Tea model: the View is its state.
type model struct{ l *liveView }

func (m model) Init() tea.Cmd { return tick() }

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.l.mu.Lock()
		m.l.w = msg.Width
		m.l.mu.Unlock()
	case tickMsg:
		return m, tick()
	}
	return m, nil
}

func (m model) View() string { return m.l.render() }

func startLive(v *View) *liveView {
	l := &liveView{v: v, done: make(chan struct{}), initial: v.width()}
	r := lipgloss.NewRenderer(v.w)
	if v.opts.NoColor {
		r.SetColorProfile(termenv.Ascii)
	}
	l.st = styles{
		head: r.NewStyle().Bold(true),
		dim:  r.NewStyle().Faint(true),
		ok:   r.NewStyle().Foreground(lipgloss.Color("2")),
		bad:  r.NewStyle().Foreground(lipgloss.Color("1")),
		task: r.NewStyle().Foreground(lipgloss.Color("6")),
	}
	// The run, not the view, owns Ctrl-C: no input, no signal handler, and
	// a panic is the CLI's to report.
	l.prog = tea.NewProgram(model{l}, tea.WithOutput(v.w), tea.WithInput(nil), tea.WithoutSignalHandler(), tea.WithoutCatchPanics())
	go func() {
		defer close(l.done)
		_, _ = l.prog.Run()
	}()
	return l
}

func (l *liveView) width() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w <= 0 {
		return l.initial
	}
	return l.w
}

func (l *liveView) refresh() { l.prog.Send(refreshMsg{}) }

// stop draws the last frame and gives the terminal back.
func (l *liveView) stop() {
	l.prog.Quit()
	<-l.done
}

// Column widths of the worker rows; the activity takes the rest.
const (
	colWorker  = 2
	colAttempt = 3
	colTime    = 6
	colTokens  = 7
	colCost    = 8
)

// render draws the view, every line cut to the width.
func (l *liveView) render() string {
	width := l.width()
	v := l.v
	v.mu.Lock()
	defer v.mu.Unlock()
	var lines []string
	colTask := 4
	for _, s := range v.tr.Slots() {
		colTask = min(max(colTask, len(s.TaskID)), 12)
	}
	rest := width - (colWorker + colTask + colAttempt + colTime + colTokens + colCost + 6)
	rest = max(rest, 8)
	lines = append(lines, l.st.head.Render(fmt.Sprintf("%-*s %-*s %-*s %-*s %-*s %*s %*s", colWorker, "W", colTask, "TASK", colAttempt, "ATT",
		colTime, "TIME", rest, "ACTIVITY", colTokens, "TOKENS", colCost, "COST")))
	priced := v.priced()
	for _, s := range v.tr.Slots() {
		if s.TaskID == "" {
			lines = append(lines, l.st.dim.Render(fmt.Sprintf("%-*d %s", colWorker, s.Worker, "idle")))
			continue
		}
		w := v.work[s.TaskID]
		if w == nil {
			w = &work{}
		}
		elapsed := v.now().Sub(s.Since)
		row := fmt.Sprintf("%-*d %s %-*d %-*s %s %*s %*s", colWorker, s.Worker, l.st.task.Render(pad(s.TaskID, colTask)), colAttempt, s.Attempt,
			colTime, clock(elapsed), pad(shorten(w.activityNow(v.now()), rest), rest), colTokens, tokens(w.usage.Tokens()), colCost, cost(w.usage.CostUSD, priced))
		lines = append(lines, row)
	}
	if len(v.tr.Slots()) == 0 {
		lines = append(lines, l.st.dim.Render("waiting for the plan"))
	}
	lines = append(lines, l.totals(priced))
	for _, en := range v.log {
		lines = append(lines, l.st.dim.Render(en))
	}
	for i, line := range lines {
		lines[i] = fit(line, width)
	}
	return strings.Join(lines, "\n")
}

// totals is the line under the workers: tasks done, failed, left, the ETA,
// the run's tokens and cost; the caller holds mu.
func (l *liveView) totals(priced bool) string {
	v := l.v
	done, failed, total := 0, 0, 0
	for _, t := range v.tr.Tasks() {
		total++
		switch t.Status {
		case planner.StatusCompleted:
			done++
		case planner.StatusFailed, planner.StatusBlocked, planner.StatusSkipped:
			failed++
		}
	}
	u := v.base
	u.Add(v.spent)
	parts := []string{fmt.Sprintf("%d/%d tasks done", done, total)}
	if failed > 0 {
		parts = append(parts, l.st.bad.Render(fmt.Sprintf("%d not done", failed)))
	}
	if eta := v.estimate(); eta != "" && done < total {
		parts = append(parts, eta)
	}
	parts = append(parts, tokens(u.Tokens())+" tokens")
	if priced {
		parts = append(parts, cost(u.CostUSD, true))
	}
	return strings.Join(parts, " · ")
}

// priced reports whether the run's model has a price; the caller holds mu.
func (v *View) priced() bool {
	_, ok := llm.PriceOf(v.opts.Model)
	return ok
}

func pad(s string, n int) string {
	if w := ansi.StringWidth(s); w < n {
		return s + strings.Repeat(" ", n-w)
	}
	return ansi.Truncate(s, n, "…")
}

// fit cuts a line to width columns.
func fit(line string, width int) string {
	if ansi.StringWidth(line) <= width {
		return line
	}
	return ansi.Truncate(line, width, "…")
}

// shorten cuts an activity to n columns. A path keeps its end, from a
// folder on where it can: "write_to_file …/parser/expression.go".
func shorten(s string, n int) string {
	if ansi.StringWidth(s) <= n {
		return s
	}
	tool, path, ok := strings.Cut(s, " ")
	room := n - ansi.StringWidth(tool) - 2 // a space and "…"
	if r := []rune(path); ok && strings.Contains(path, "/") && !strings.Contains(path, " ") && room >= 8 && len(r) > room {
		tail := string(r[len(r)-room:])
		if i := strings.Index(tail, "/"); i >= 0 && i < len(tail)-1 {
			tail = tail[i:]
		}
		return tool + " …" + tail
	}
	return ansi.Truncate(s, n, "…")
}

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	if d < 0 {
		d = 0
	}
	if d >= time.Hour {
		return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func tokens(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}

func cost(usd float64, priced bool) string {
	if !priced {
		return "-"
	}
	return fmt.Sprintf("$%.2f", usd)
}
