package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/runview"
	"github.com/taskloom/taskloom/worktree"
)

// newView returns how a run is shown on w: a live view on a terminal,
// plain lines otherwise, one JSON event per line with --json.
func newView(w io.Writer, asJSON bool, runID string, meta runMeta) *runview.View {
	return runview.New(w, runview.Opts{RunID: runID, Model: meta.Model, Workers: meta.Workers, JSON: asJSON,
		Live: !asJSON && isTerminal(w), NoColor: os.Getenv("NO_COLOR") != ""})
}

// watched returns ctx under which the pipeline tells v what each attempt
// does, and graph options that tell v the graph's events.
func watched(ctx context.Context, v *runview.View) (context.Context, *graph.RunOpts) {
	return nodes.WithActivityFunc(ctx, v.Activity), &graph.RunOpts{EventFunc: v.Graph}
}

// isTerminal reports whether w is a terminal: a character device other
// than /dev/null, with a TERM other than dumb.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isCharDevice(f) && os.Getenv("TERM") != "dumb"
}

// finishRun shows how the call ended and returns the error that carries
// its exit code.
func finishRun(v *runview.View, runID string, res graph.Result[nodes.State], err error) error {
	status := nodes.StatusOf(res, err)
	if err != nil && res.Step < 0 && len(res.Next) == 0 && res.State.RunID.Get() == "" {
		status = "" // it never started
	}
	code := nodes.ExitCode(status)
	if err != nil && !errors.Is(err, context.Canceled) {
		code = exitError
	}
	v.Finish(res, status, code)
	switch {
	case errors.Is(err, context.Canceled):
		return withCode(exitInterrupted, nil)
	case err != nil:
		if fault := storeFault(runID, err); fault != nil {
			return fault
		}
		var reset *worktree.ResetError
		if errors.As(err, &reset) {
			return reset // one line, without the nodes it went through
		}
		if errors.Is(err, graph.ErrStepLimit) {
			return fmt.Errorf("%w; resume it with: taskloom resume %s", err, runID)
		}
		return err
	case code == exitOK:
		return nil
	}
	return withCode(code, nil)
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
