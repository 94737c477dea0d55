package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/clip"
)

// CommandWorkerOpts configures a CommandWorker.
type CommandWorkerOpts struct {
	// Argv is the command template. In every argument, {prompt} becomes
	// the attempt's prompt (BuildPrompt), {task_id} the task's ID and
	// {worktree} the worktree's path. Required.
	Argv []string
	// Timeout bounds one run; default 30m. The whole process group is
	// killed when it passes.
	Timeout time.Duration
	// OutputLimit caps the output kept, head and tail; default 64 KiB.
	OutputLimit int
	// ConfineFunc confines the CLI in the worktree. An external agent CLI
	// needs its provider key and the network, so the caller's confinement
	// should keep both. nil means the default of the agent's commands.
	ConfineFunc ConfineFunc
	// Accounting, when set, receives the cost the CLI reports.
	Accounting *Accounting
	// Logger receives the worker's logs; nil discards them.
	Logger *slog.Logger
}

// CommandWorker runs an external agent CLI in the worktree.
type CommandWorker struct {
	opts CommandWorkerOpts
}

// NewCommandWorker checks opts and returns the worker.
func NewCommandWorker(opts CommandWorkerOpts) (*CommandWorker, error) {
	if len(opts.Argv) == 0 || strings.TrimSpace(opts.Argv[0]) == "" {
		return nil, errors.New("worker.command: must name a program")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = 64 << 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &CommandWorker{opts: opts}, nil
}

// Argv returns the command line for job.
func (w *CommandWorker) Argv(job Job) []string {
	r := strings.NewReplacer("{prompt}", BuildPrompt(job), "{task_id}", job.Task.ID, "{worktree}", job.Worktree)
	out := make([]string, len(w.opts.Argv))
	for i, a := range w.opts.Argv {
		out[i] = r.Replace(a)
	}
	return out
}

// Implement runs the CLI once. Exit code 0 is done unless the CLI's JSON
// says is_error; any other exit, or a timeout, is incomplete; a
// <promise>BLOCKED</promise> line is blocked. Only a failure to start the
// program, or ctx ending, is an error.
func (w *CommandWorker) Implement(ctx context.Context, job Job) (Outcome, error) {
	argv := w.Argv(job)
	confine := w.opts.ConfineFunc
	if confine == nil {
		confine = defaultConfinement
	}
	cf, err := confine(job.Worktree)
	if err != nil {
		return Outcome{Status: OutcomeIncomplete, Detail: err.Error()}, fmt.Errorf("command worker %s: %w", argv[0], err)
	}
	res, err := runProcess(ctx, job.Worktree, argv, cf, w.opts.Timeout, w.opts.OutputLimit)
	code := res.ExitCode
	out := Outcome{ExitCode: &code, Output: res.Output}
	if err != nil {
		out.Status, out.Detail = OutcomeIncomplete, err.Error()
		return out, fmt.Errorf("command worker %s: %w", argv[0], err)
	}
	w.opts.Logger.InfoContext(ctx, "command worker finished", slog.String("task_id", job.Task.ID),
		slog.Int("exit_code", code), slog.Duration("duration", res.Duration), slog.Bool("timed_out", res.TimedOut))

	cli, ok := ParseCLIOutput(res.Stdout)
	text := res.Stdout
	if ok {
		out.Summary = cli.Result
		out.SessionID = cli.SessionID
		out.Usage = Usage{Calls: max(cli.NumTurns, 1), InputTokens: cli.InputTokens, OutputTokens: cli.OutputTokens, CostUSD: cli.CostUSD}
		text = cli.Result
	} else {
		out.Summary = clip.Tail(strings.TrimSpace(res.Stdout), 4000)
	}
	// Its calls cost something all the same: say so rather than let the
	// run's total read as complete.
	out.Usage.Unreported = !cli.UsageReported
	if w.opts.Accounting != nil && out.Usage != (Usage{}) {
		w.opts.Accounting.Add(job.RunID, job.Task.ID, "", out.Usage)
	}
	switch {
	case res.TimedOut:
		out.Status, out.Detail = OutcomeIncomplete, fmt.Sprintf("timed out after %s", w.opts.Timeout)
	case lastPromise(text) == "BLOCKED":
		out.Status, out.Question, out.Detail = OutcomeQuestion, blockedQuestion(text), "the agent printed <promise>BLOCKED</promise>"
	case code != 0:
		out.Status, out.Detail = OutcomeIncomplete, fmt.Sprintf("exit code %d", code)
		if tail := tailLines(res.Stderr, 20, 2000); tail != "" {
			out.Detail += "; its stderr ends:\n" + tail
		}
	case ok && cli.IsError:
		out.Status, out.Detail = OutcomeIncomplete, "the CLI reported an error: "+firstNonEmpty(cli.Subtype, "is_error")
	default:
		out.Status = OutcomeDone
	}
	return out, nil
}

// CLIOutput is what ParseCLIOutput understood of an agent CLI's JSON.
type CLIOutput struct {
	Result       string
	SessionID    string
	CostUSD      float64
	InputTokens  int
	OutputTokens int
	NumTurns     int
	IsError      bool
	Subtype      string
	// UsageReported: the JSON had a cost or token counts.
	UsageReported bool
}

// ParseCLIOutput reads `claude -p --output-format json` output (one JSON
// object) or stream-json output (one object a line; the last one of type
// "result" wins). It reports false when stdout holds no such object.
func ParseCLIOutput(stdout string) (CLIOutput, bool) {
	trimmed := strings.TrimSpace(stdout)
	if trimmed == "" {
		return CLIOutput{}, false
	}
	if o, ok := decodeCLI([]byte(trimmed)); ok {
		return o, true
	}
	lines := strings.Split(trimmed, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, "{") {
			continue
		}
		if o, ok := decodeCLI([]byte(line)); ok {
			return o, true
		}
	}
	return CLIOutput{}, false
}

func decodeCLI(data []byte) (CLIOutput, bool) {
	var raw struct {
		Type         string   `json:"type"`
		Subtype      string   `json:"subtype"`
		Result       *string  `json:"result"`
		SessionID    string   `json:"session_id"`
		TotalCostUSD *float64 `json:"total_cost_usd"`
		CostUSD      *float64 `json:"cost_usd"`
		IsError      bool     `json:"is_error"`
		NumTurns     int      `json:"num_turns"`
		Usage        *struct {
			InputTokens              int `json:"input_tokens"`
			OutputTokens             int `json:"output_tokens"`
			CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
			CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil || dec.More() {
		return CLIOutput{}, false
	}
	if raw.Result == nil && raw.Type != "result" {
		return CLIOutput{}, false
	}
	o := CLIOutput{SessionID: raw.SessionID, IsError: raw.IsError, Subtype: raw.Subtype, NumTurns: raw.NumTurns}
	if raw.Result != nil {
		o.Result = *raw.Result
	}
	o.UsageReported = raw.TotalCostUSD != nil || raw.CostUSD != nil || raw.Usage != nil
	switch {
	case raw.TotalCostUSD != nil:
		o.CostUSD = *raw.TotalCostUSD
	case raw.CostUSD != nil:
		o.CostUSD = *raw.CostUSD
	}
	if raw.Usage != nil {
		o.InputTokens = raw.Usage.InputTokens + raw.Usage.CacheCreationInputTokens + raw.Usage.CacheReadInputTokens
		o.OutputTokens = raw.Usage.OutputTokens
	}
	return o, true
}

// tailLines returns the last n lines of s, at most limit bytes of them.
func tailLines(s string, n, limit int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(clip.Tail(strings.Join(lines, "\n"), limit))
}
