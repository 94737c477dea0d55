package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/runview"
	"github.com/taskloom/taskloom/worktree"
)

// LoadRun returns a stored run and its meta.
func (s *Session) LoadRun(ctx context.Context, runID string) (nodes.Run, Meta, error) {
	run, err := s.Store.Run(ctx, runID)
	if err != nil {
		if errors.Is(err, nodes.ErrRunNotFound) {
			return run, Meta{}, fmt.Errorf("run %s not found in %s; pass --db or --repo for the store that holds it", runID, checkpoint.MaskURL(s.DBURL))
		}
		return run, Meta{}, err
	}
	meta, err := ParseMeta(run)
	return run, meta, err
}

// Uncommitted returns the tracked files with uncommitted changes in the
// checkout of repo where the run's target branch is, which resume refuses
// to integrate into; nil when there are none, or when that cannot be told.
func Uncommitted(ctx context.Context, repo string) []string {
	_, err := worktree.Open(ctx, repo, nil)
	var dirty *worktree.DirtyError
	if !errors.As(err, &dirty) {
		return nil
	}
	if len(dirty.Files) == 0 {
		return []string{"tracked files"}
	}
	return dirty.Files
}

// ParseMeta reads what a run keeps so that resume rebuilds its pipeline.
func ParseMeta(run nodes.Run) (Meta, error) {
	var meta Meta
	if len(run.Meta) > 0 {
		if err := json.Unmarshal(run.Meta, &meta); err != nil {
			return meta, fmt.Errorf("run %s: bad meta: %w", run.ID, err)
		}
	}
	return meta, nil
}

// FindRun returns run id, or the latest run on the session's repo when id
// is empty.
func (s *Session) FindRun(ctx context.Context, id string) (nodes.Run, error) {
	if id != "" {
		run, _, err := s.LoadRun(ctx, id)
		return run, err
	}
	run, err := s.Store.LatestRun(ctx, s.Repo)
	if errors.Is(err, nodes.ErrRunNotFound) {
		return run, fmt.Errorf("no runs of repo %s in %s; start one with taskloom run PRODUCT.md, or pass --repo or --db", s.Repo, checkpoint.MaskURL(s.DBURL))
	}
	return run, err
}

// HeadState returns a run's newest state; ok is false when the run has no
// checkpoint yet (it stopped before its first step), and the result is
// then empty.
func HeadState(ctx context.Context, g *graph.Runnable[nodes.State], runID string) (graph.Result[nodes.State], bool, error) {
	res, err := g.State(ctx, runID, -1)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return graph.Result[nodes.State]{Step: -1}, false, nil
	}
	var decode *checkpoint.DecodeError
	if errors.As(err, &decode) {
		return res, false, DecodeFault(decode, "")
	}
	if err != nil {
		return res, false, fmt.Errorf("read the state of run %s: %w", runID, err)
	}
	return res, true, nil
}

// ViewFunc returns how a run is shown, once its ID and meta are known.
type ViewFunc func(runID string, meta Meta) *runview.View

// Outcome is how a call that drove a run ended.
type Outcome struct {
	RunID string
	// View is nil when the call failed before the run was shown.
	View   *runview.View
	Result graph.Result[nodes.State]
}

// StartOpts says what Start runs and how it is shown.
type StartOpts struct {
	Product    string
	ConfigFile string
	// Dir is where relative paths were given (the working directory).
	Dir  string
	View ViewFunc
	// Warn hears what of the sandbox this machine cannot enforce.
	Warn io.Writer
}

// Start starts a new run and drives it until it ends or pauses for
// review.
func (s *Session) Start(ctx context.Context, o StartOpts) (Outcome, error) {
	product, err := filepath.Abs(o.Product)
	if err != nil {
		return Outcome{}, err
	}
	if err := checkTaskList(o.Product, product); err != nil {
		return Outcome{}, err
	}
	configFile := o.ConfigFile
	if configFile != "" {
		// Resume reads it again, from wherever it is run.
		if configFile, err = filepath.Abs(configFile); err != nil {
			return Outcome{}, err
		}
	}
	meta := Meta{Model: ResolveModelSpec(s.Cfg.Model, o.Dir, s.Repo), Workers: s.Cfg.ParallelWorkers, ConfigFile: configFile, newRun: true}
	out := Outcome{RunID: NewRunID(time.Now())}
	p, err := s.Pipeline(ctx, out.RunID, product, meta)
	if err != nil {
		return out, err
	}
	release, err := s.hold(ctx, p, out.RunID, meta)
	if err != nil {
		return out, err
	}
	defer release()
	metaJSON, _ := json.Marshal(meta)
	out.View = s.show(o.View, out.RunID, meta)
	out.View.Started(product, s.Repo, p.Repo.MainBranch(), "")
	warnSandbox(o.Warn)
	ctx, opts := watched(ctx, out.View)
	runner := s.driven(p)
	out.Result, err = runner.Start(ctx, nodes.Run{ID: out.RunID, ProductPath: product, Repo: s.Repo, Meta: metaJSON}, opts)
	noteLanded(ctx, runner, out, err)
	s.syncBehind()
	return out, err
}

// noteLanded tells the view of a run that an error or a signal stopped
// which of its tasks were integrated before their record was written, so
// that the summary does not call them not done.
func noteLanded(ctx context.Context, runner *nodes.Runner, out Outcome, err error) {
	if err == nil || out.View == nil {
		return
	}
	// The signal that stopped the run cancelled ctx; this look is short.
	landed, lerr := runner.Landed(context.WithoutCancel(ctx), out.RunID, out.Result.State)
	if lerr == nil && len(landed) > 0 {
		out.View.Landed(landed)
	}
}

// checkTaskList reads the PRODUCT.md at path, named as the user gave it,
// and returns the problems of its explicit task list, each naming its
// line: a list that cannot be read, or an empty file, stops there, as plan
// does, before a run is recorded. A prose PRODUCT.md is left to the
// breakdown.
func checkTaskList(name, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if strings.TrimSpace(string(data)) == "" {
		return planner.ErrEmpty(name)
	}
	if !planner.HasTaskList(string(data)) {
		return nil
	}
	_, err = planner.ParseTaskListFile(name, string(data))
	return err
}

// ResumeOpts says how Resume continues a run.
type ResumeOpts struct {
	// From, when set, is the checkpoint step to fork the run from first.
	From string
	// AcceptHead takes the run's target branch as it is, after the user
	// reset or rewrote it.
	AcceptHead bool
	View       ViewFunc
	// Warn hears what of the sandbox this machine cannot enforce.
	Warn io.Writer
	// Out hears which tasks AcceptHead redoes; nil says nothing.
	Out io.Writer
}

// Resume continues a stored run (or a fork of it) with its own pipeline.
func (s *Session) Resume(ctx context.Context, runID string, o ResumeOpts) (Outcome, error) {
	run, meta, err := s.LoadRun(ctx, runID)
	out := Outcome{RunID: runID}
	if err != nil {
		return out, err
	}
	if run.Repo != s.Repo || meta.ConfigFile != "" {
		// The run goes on with the config it was made with: its repo's,
		// or the file given to run with --config.
		cfg, err := LoadConfig(s.flags, run.Repo, meta.ConfigFile)
		if err != nil {
			return out, err
		}
		s.Cfg, s.Repo = cfg, run.Repo
	}
	if o.From == "" && !o.AcceptHead && run.Status == nodes.RunCompleted {
		// Nothing is left to run: only the sync catches up.
		out.View = s.show(o.View, run.ID, meta)
		out.View.Started("", "", meta.TargetBranch, "ended completed already; nothing is left to run")
		out.Result, err = s.catchUp(ctx, run.ID)
		return out, err
	}
	how := "resumed"
	switch run.Status {
	case nodes.RunPartial, nodes.RunFailed, nodes.RunAborted:
		if o.From == "" && !o.AcceptHead {
			how = "ended " + run.Status + " already; nothing is left to run"
		}
	}
	if o.From != "" {
		step, err := strconv.ParseInt(o.From, 10, 64)
		if err != nil {
			return out, err
		}
		source := run.ID
		if run.ID, err = s.fork(ctx, run, meta, step); err != nil {
			return out, err
		}
		out.RunID = run.ID
		how = fmt.Sprintf("forked from %s at checkpoint %d", source, step)
	}
	p, err := s.Pipeline(ctx, run.ID, run.ProductPath, meta)
	if err != nil {
		return out, err
	}
	release, err := s.hold(ctx, p, run.ID, meta)
	if err != nil {
		return out, err
	}
	defer release()
	v := s.show(o.View, run.ID, meta)
	v.Started("", "", p.Repo.MainBranch(), how)
	warnSandbox(o.Warn)
	runner := s.driven(p)
	if o.AcceptHead {
		acc, err := runner.AcceptHead(ctx, run.ID)
		if err != nil {
			return out, err
		}
		if len(acc.Redo) > 0 && o.Out != nil {
			fmt.Fprintf(o.Out, "accepted %s at %s; redoing %s, whose commits are gone from it\n", p.Repo.MainBranch(), shortHash(acc.Head), strings.Join(acc.Redo, ", "))
		}
	} else if err := runner.CheckHead(ctx, run.ID); err != nil {
		return out, err
	}
	out.View = v
	if g, err := runner.Runnable(); err == nil {
		if st, err := g.State(ctx, run.ID, -1); err == nil {
			v.Seed(st.State)
		}
	}
	ctx, opts := watched(ctx, v)
	out.Result, err = runner.Resume(ctx, run.ID, opts)
	noteLanded(ctx, runner, out, err)
	s.syncBehind()
	return out, BusyMessage(run.ID, err)
}

// hold takes what driving run needs while this process lives: the one
// live run of its repo and branch (a second driver of the same run is told
// who drives it), and the queue's workers when its attempts go there. The
// returned function lets both go.
func (s *Session) hold(ctx context.Context, p *nodes.Pipeline, runID string, meta Meta) (release func(), err error) {
	unlock, err := p.Repo.LockBranch(ctx, runID)
	var live *worktree.LiveError
	if errors.As(err, &live) && live.Run == runID {
		return nil, fmt.Errorf("run %s is being driven by another process (pid %d, host %s); wait for it to finish or stop it", runID, live.PID, live.Host)
	}
	if err != nil {
		return nil, err
	}
	stop, err := s.distribute(ctx, p, meta)
	if err != nil {
		unlock()
		return nil, err
	}
	return func() {
		stop()
		unlock()
	}, nil
}

// fork starts a new run from a checkpoint of run and returns its ID.
func (s *Session) fork(ctx context.Context, run nodes.Run, meta Meta, step int64) (string, error) {
	newID := NewRunID(time.Now())
	p, err := s.Pipeline(ctx, newID, run.ProductPath, meta)
	if err != nil {
		return "", err
	}
	g, err := s.Runner(p).Runnable()
	if err != nil {
		return "", err
	}
	if err := g.Fork(ctx, run.ID, step, newID); err != nil {
		return "", fmt.Errorf("fork run %s at checkpoint %d: %w", run.ID, step, err)
	}
	// The fork has its own worktrees and trailers; what the source did
	// after the checkpoint, on the branch and in flight, is settled.
	if _, err := g.UpdateState(ctx, newID, "", nodes.State{RunID: graph.V(newID)}); err != nil {
		return "", err
	}
	family, err := s.family(ctx, run)
	if err != nil {
		return "", err
	}
	if _, err := s.Runner(p).AdoptFork(ctx, newID, family); err != nil {
		return "", err
	}
	fork := run
	// The fork starts now (the store's clock), not when its source did.
	fork.ID, fork.CreatedAt, fork.UpdatedAt = newID, time.Time{}, time.Time{}
	fm := meta
	fm.ForkedFrom = run.ID
	if fork.Meta, err = json.Marshal(fm); err != nil {
		return "", err
	}
	if err := s.Store.CreateRun(ctx, fork); err != nil {
		return "", err
	}
	return newID, nil
}

// family returns the runs of run's repo that share its first run: run,
// the run it was forked from and so on back, and every fork of any of
// them. What one of them integrated is on the branch for all.
func (s *Session) family(ctx context.Context, run nodes.Run) ([]string, error) {
	runs, err := s.Store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	parent := map[string]string{}
	for _, r := range runs {
		if m, err := ParseMeta(r); err == nil {
			parent[r.ID] = m.ForkedFrom
		}
	}
	root := func(id string) string {
		for seen := 0; parent[id] != "" && seen < len(runs); seen++ {
			id = parent[id]
		}
		return id
	}
	mine := root(run.ID)
	out := []string{run.ID}
	for _, r := range runs {
		if r.ID != run.ID && root(r.ID) == mine {
			out = append(out, r.ID)
		}
	}
	return out, nil
}

// show makes the run's view and lets it hear the provider's waits.
func (s *Session) show(view ViewFunc, runID string, meta Meta) *runview.View {
	v := view(runID, meta)
	wait := v.ProviderWait
	s.waits.Store(&wait)
	return v
}

// warnSandbox says on w, right after the run ID, what of the sandbox this
// machine cannot enforce.
func warnSandbox(w io.Writer) {
	if st := proc.Probe(); !st.Complete() && w != nil {
		fmt.Fprintf(w, "taskloom: warning: %s\n", st)
	}
}

// watched returns ctx under which the pipeline tells v what each attempt
// does, and graph options that tell v the graph's events.
func watched(ctx context.Context, v *runview.View) (context.Context, *graph.RunOpts) {
	return nodes.WithActivityFunc(ctx, v.Activity), &graph.RunOpts{EventFunc: v.Graph}
}

func shortHash(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
