package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/taskloom/taskloom/internal/clip"
)

// RalphOpts configures a Ralph loop.
type RalphOpts struct {
	// MaxIterations bounds the loop; default 10.
	MaxIterations int
	// CompletionPromise is the word of <promise>WORD</promise> that claims
	// completion; default "DONE".
	CompletionPromise string
	// StagnationLimit stops the loop as BLOCKED after this many iterations
	// in a row that changed nothing; default 3.
	StagnationLimit int
	// TestsPassFunc checks the job's task in its worktree as its
	// verification will: its files, its tests and the test command. A
	// completion claim ends the loop only when it reports true. Required.
	TestsPassFunc func(ctx context.Context, job Job) (passed bool, output string, err error)
	// DiffFunc reports the worktree's changes, for example `git status
	// --porcelain` with `git diff` (content matters: a file edited again
	// must change the report). Iterations that leave it unchanged count as
	// stagnating. Nil turns stagnation detection off.
	DiffFunc func(ctx context.Context, worktree string) (string, error)
	// Logger receives the loop's logs; nil discards them.
	Logger *slog.Logger
}

// Ralph reruns a worker with fresh context (a new conversation or process
// each iteration; what persists is the worktree) until the work is done
// and tested, it is blocked, it stagnates, or the iterations run out.
type Ralph struct {
	inner Worker
	opts  RalphOpts
}

// NewRalph wraps inner in a Ralph loop.
func NewRalph(inner Worker, opts RalphOpts) (*Ralph, error) {
	if inner == nil {
		return nil, errors.New("ralph: nil worker")
	}
	if opts.TestsPassFunc == nil {
		return nil, errors.New("ralph: TestsPassFunc is required: a completion promise counts only when the tests pass")
	}
	if opts.MaxIterations <= 0 {
		opts.MaxIterations = 10
	}
	if opts.CompletionPromise == "" {
		opts.CompletionPromise = "DONE"
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(opts.CompletionPromise) {
		return nil, fmt.Errorf("ralph.completion_promise: must be a word of letters, digits, _ or -, got %q", opts.CompletionPromise)
	}
	if opts.StagnationLimit <= 0 {
		opts.StagnationLimit = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ralph{inner: inner, opts: opts}, nil
}

func (r *Ralph) instructions() string {
	// The tags stay inside sentences here: only a tag alone on its line
	// counts, so a CLI that echoes its prompt does not make a promise.
	return fmt.Sprintf("This is one iteration of a loop: each iteration starts with fresh context, and your files in the worktree are what carries over. Make progress on the task. "+
		"When the task is completely done and its tests pass, end your final message with the tag <promise>%s</promise> on a line of its own. "+
		"If you cannot proceed without a person, say why and end with the tag <promise>BLOCKED</promise> on a line of its own.", r.opts.CompletionPromise)
}

// Implement runs the loop. The Outcome's Usage sums every iteration's.
func (r *Ralph) Implement(ctx context.Context, job Job) (Outcome, error) {
	var total Usage
	var prevDiff string
	haveDiff := false
	if r.opts.DiffFunc != nil {
		d, err := r.opts.DiffFunc(ctx, job.Worktree)
		if err != nil {
			return Outcome{Status: OutcomeIncomplete, Detail: err.Error()}, fmt.Errorf("ralph: diff: %w", err)
		}
		prevDiff, haveDiff = d, true
	}
	still := 0
	lastFailure := job.PreviousError
	var last Outcome
	for i := 1; i <= r.opts.MaxIterations; i++ {
		if err := ctx.Err(); err != nil {
			last.Status, last.Iterations, last.Usage = OutcomeIncomplete, i-1, total
			return last, fmt.Errorf("ralph: %w", err)
		}
		j := job
		j.Iteration = i
		if job.ConversationID != "" {
			// Each iteration is a conversation of its own.
			j.ConversationID = fmt.Sprintf("%s/i%d", job.ConversationID, i)
		}
		j.PreviousError = lastFailure
		j.Instructions = strings.TrimSpace(job.Instructions + "\n\n" + r.instructions())
		out, err := r.inner.Implement(ctx, j)
		total.Add(out.Usage)
		out.Usage, out.Iterations = total, i
		last = out
		if err != nil {
			return out, fmt.Errorf("ralph iteration %d: %w", i, err)
		}
		text := out.Summary
		if out.Output != "" && out.Summary == "" {
			text = out.Output
		}
		promise := lastPromise(text)
		r.opts.Logger.InfoContext(ctx, "ralph iteration", slog.String("task_id", job.Task.ID), slog.Int("iteration", i),
			slog.String("status", string(out.Status)), slog.String("promise", promise))
		switch {
		case out.Status == OutcomeQuestion:
			return out, nil
		case promise == "BLOCKED":
			// The worker cannot go on without a person: the run asks
			// one, in the worker's words, as it does a question.
			out.Status, out.Question = OutcomeQuestion, blockedQuestion(text)
			out.Detail = "the worker printed <promise>BLOCKED</promise>"
			return out, nil
		case out.Status == OutcomeBlocked:
			return out, nil
		}
		if promise == r.opts.CompletionPromise || out.Status == OutcomeDone {
			passed, testOut, err := r.opts.TestsPassFunc(ctx, job)
			if err != nil {
				return out, fmt.Errorf("ralph iteration %d: tests: %w", i, err)
			}
			if passed {
				out.Status, out.Detail = OutcomeDone, ""
				return out, nil
			}
			lastFailure = "The previous iteration claimed completion, but the tests fail:\n" + testOut
		}
		if haveDiff {
			d, err := r.opts.DiffFunc(ctx, job.Worktree)
			if err != nil {
				return out, fmt.Errorf("ralph iteration %d: diff: %w", i, err)
			}
			if d == prevDiff {
				still++
			} else {
				still = 0
			}
			prevDiff = d
			if still >= r.opts.StagnationLimit {
				out.Status = OutcomeBlocked
				out.Detail = fmt.Sprintf("stagnating: %d iterations in a row changed nothing", still)
				return out, nil
			}
		}
	}
	last.Status = OutcomeIncomplete
	last.Detail = fmt.Sprintf("max_iterations: %d iterations without a tested completion", r.opts.MaxIterations)
	return last, nil
}

// blockedQuestion is what a worker that printed <promise>BLOCKED</promise>
// said before it: its reason, for the person who reviews the task.
func blockedQuestion(text string) string {
	var kept []string
	for _, l := range strings.Split(text, "\n") {
		if promiseLine.MatchString(l) {
			continue
		}
		kept = append(kept, l)
	}
	if q := strings.TrimSpace(strings.Join(kept, "\n")); q != "" {
		return clip.Tail(q, 2000)
	}
	return "the worker printed <promise>BLOCKED</promise> without saying why"
}

var promiseLine = regexp.MustCompile(`^\s*<promise>\s*([A-Za-z0-9_-]+)\s*</promise>\s*$`)

// lastPromise returns the word of the last line of text that is a promise
// tag alone, or "". A tag inside a sentence (quoting the instructions, for
// example) does not count.
func lastPromise(text string) string {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m := promiseLine.FindStringSubmatch(lines[i]); m != nil {
			return m[1]
		}
	}
	return ""
}
