package nodes

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
)

// replanRun stores a run whose tasks are those of plan with the given
// statuses, written as asNode wrote them, and returns its graph.
func replanRun(t *testing.T, plan *planner.Plan, status map[string]planner.Status, asNode string, escs []Escalation) *graph.Runnable[State] {
	t.Helper()
	g := plannedRun(t, plan)
	var seed State
	seed.Milestones.Set(plan.Milestones)
	for _, tk := range plan.Tasks {
		if s, ok := status[tk.ID]; ok {
			tk.Status = s
		}
		seed.Tasks.Put(tk.ID, tk)
	}
	seed.Escalations.Set(escs)
	_, err := g.UpdateState(context.Background(), "r1", asNode, seed)
	require.NoError(t, err)
	return g
}

// plannedRun stores run r1 as task_breakdown leaves it with plan: its
// first step only.
func plannedRun(t *testing.T, plan *planner.Plan) *graph.Runnable[State] {
	t.Helper()
	r := &Runner{Pipeline: &Pipeline{PlanFunc: func(context.Context) (*planner.Plan, error) { return plan, nil }},
		Saver: checkpoint.NewMemory(), StepLimit: 1}
	g, err := r.Runnable()
	require.NoError(t, err)
	var in State
	in.RunID.Set("r1")
	_, err = g.Invoke(context.Background(), "r1", in, nil)
	require.ErrorIs(t, err, graph.ErrStepLimit)
	return g
}

func replanPlan(t *testing.T, tasks ...planner.RawTask) ReplanFunc {
	t.Helper()
	p, err := planner.Build(&planner.RawPlan{Milestones: []planner.RawMilestone{{ID: "M1", Name: "One"}}, Tasks: tasks}, nil)
	require.NoError(t, err)
	return func(context.Context, []planner.Task) (*planner.Plan, error) { return p, nil }
}

func rawTask(id, file string, deps ...string) planner.RawTask {
	return planner.RawTask{ID: id, Title: "Write " + file, MilestoneID: "M1", AcceptanceCriteria: []string{file + " exists"},
		FilesToCreate: []string{file}, Dependencies: deps}
}

func TestReplanAppliesAsCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, err := replanPlan(t, rawTask("T1", "a"), rawTask("T2", "b"), rawTask("T3", "c", "T2"))(ctx, nil)
	require.NoError(t, err)
	// Paused for review of T2, which failed; T3 is blocked behind it.
	g := replanRun(t, old, map[string]planner.Status{"T1": planner.StatusCompleted, "T2": planner.StatusFailed, "T3": planner.StatusBlocked},
		NodeSelect, []Escalation{{TaskID: "T2", Reason: ReasonMaxAttempts, Error: "tests failed"}})
	before, err := g.State(ctx, "r1", -1)
	require.NoError(t, err)
	require.Equal(t, []string{NodeEscalation}, before.Next)

	changed := rawTask("T2", "b")
	changed.AcceptanceCriteria = []string{"b exists and is not empty"}
	next := replanPlan(t, rawTask("T1", "a"), changed, rawTask("T4", "d", "T1"))

	dry, err := Replan(ctx, g, "r1", next, nil)
	require.NoError(t, err)
	require.False(t, dry.Applied)
	after, err := g.State(ctx, "r1", -1)
	require.NoError(t, err)
	require.Equal(t, before.Step, after.Step, "a dry run records nothing")

	res, err := Replan(ctx, g, "r1", next, &ReplanOpts{Apply: true})
	require.NoError(t, err)
	require.True(t, res.Applied)
	after, err = g.State(ctx, "r1", -1)
	require.NoError(t, err)
	require.Equal(t, res.Checkpoint, after.Step)
	require.Equal(t, before.Step+1, after.Step)
	require.Equal(t, []string{NodeEscalation}, after.Next, "the run goes on where it paused")
	require.Empty(t, after.State.Escalations.Get(), "the changed T2 is not asked about again")
	status := map[string]planner.Status{}
	for _, tk := range after.State.Tasks.Values() {
		status[tk.ID] = tk.Status
	}
	require.Equal(t, map[string]planner.Status{"T1": planner.StatusCompleted, "T2": planner.StatusPending,
		"T3": planner.StatusSkipped, "T4": planner.StatusPending}, status)
	log := after.State.Log.Items()
	require.Equal(t, "replan: 1 kept, 1 changed (T2), 1 added (T4), 1 removed (T3)", log[len(log)-1].Text)

	// The checkpoint before the replan can still be forked.
	require.NoError(t, g.Fork(ctx, "r1", before.Step, "r1-fork"))
	forked, err := g.State(ctx, "r1-fork", -1)
	require.NoError(t, err)
	t2, _ := forked.State.Tasks.Get("T2")
	require.Equal(t, planner.StatusFailed, t2.Status)
}

func TestReplanCancelsAttemptsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, err := replanPlan(t, rawTask("T1", "a"), rawTask("T2", "b"))(ctx, nil)
	require.NoError(t, err)
	// Stopped (Ctrl-C) while T1 and T2 were being implemented.
	g := replanRun(t, old, map[string]planner.Status{"T1": planner.StatusInProgress, "T2": planner.StatusInProgress}, NodeImplement, nil)
	res, err := Replan(ctx, g, "r1", replanPlan(t, rawTask("T1", "a")), &ReplanOpts{Apply: true})
	require.NoError(t, err)
	require.True(t, res.Applied)
	after, err := g.State(ctx, "r1", -1)
	require.NoError(t, err)
	require.Equal(t, []string{NodeSelect}, after.Next, "the run selects tasks again")
	t1, _ := after.State.Tasks.Get("T1")
	t2, _ := after.State.Tasks.Get("T2")
	require.Equal(t, planner.StatusPending, t1.Status, "its cut-short attempt runs again")
	require.Equal(t, planner.StatusSkipped, t2.Status)
	require.Equal(t, planner.RemovedReason, t2.Error)
}

func TestReplanRefusesEndedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, err := replanPlan(t, rawTask("T1", "a"))(ctx, nil)
	require.NoError(t, err)
	g := plannedRun(t, old)
	var seed State
	seed.Outcome.Set(OutcomeCompleted)
	_, err = g.UpdateState(ctx, "r1", NodeBuild, seed)
	require.NoError(t, err)
	_, err = Replan(ctx, g, "r1", replanPlan(t, rawTask("T1", "a")), nil)
	require.ErrorContains(t, err, "run r1 has ended")
}

// A replan of a run paused for review lets the tasks it adds run before
// the review it keeps is asked again.
func TestReplanOfAPausedRunRunsNewTasksFirst(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/mul.go": mulWrongGo, "calc/mul_test.go": mulTestGo},
		"T5": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
	}}
	t1 := task("T1", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go")
	p := newTestPipeline(t, dir, w, planOf(t1))
	p.MaxAttempts = 1
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	_, status := h.start()
	require.Equal(t, RunPaused, status)

	g, err := h.runner.Runnable()
	require.NoError(t, err)
	t5 := task("T5", "Add", []string{"calc/add.go"}, "calc/add_test.go")
	_, err = Replan(context.Background(), g, testRunID, func(context.Context, []planner.Task) (*planner.Plan, error) {
		return planOf(t1, t5), nil
	}, &ReplanOpts{Apply: true})
	require.NoError(t, err)
	res, err := h.runner.Resume(context.Background(), testRunID, h.opts())
	require.NoError(t, err)
	require.Equal(t, RunPaused, h.status(), logText(res.State))
	require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, "T5"), "T5 ran before the review")
	ps := payloads(t, res)
	require.Len(t, ps, 1)
	require.Equal(t, "T1", ps[0].TaskID, "the kept escalation is asked again")
}

// A replan of a run whose review decisions are recorded, all of them or
// some, keeps them: the decided tasks are acted on, the run is not asked
// about them again, and the tasks the replan adds run before the review of
// the undecided ones.
func TestReplanKeepsRecordedDecisions(t *testing.T) {
	t.Parallel()
	negWrong := "package calc\n\n// Neg returns -a.\nfunc Neg(a int) int { return a }\n"
	for _, all := range []bool{true, false} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			t.Parallel()
			dir := newTestRepo(t, nil)
			w := &fileWorker{script: map[string]map[string]string{
				"T1": {"calc/mul.go": mulWrongGo, "calc/mul_test.go": mulTestGo},
				"T2": {"calc/neg.go": negWrong, "calc/neg_test.go": negTestGo},
				"T5": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
			}}
			t1 := task("T1", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go")
			t2 := task("T2", "Neg", []string{"calc/neg.go"}, "calc/neg_test.go")
			p := newTestPipeline(t, dir, w, planOf(t1, t2))
			p.MaxAttempts = 1
			h := newHarness(t, dir, p, storetest.NewMemory(t))
			res, status := h.start()
			require.Equal(t, RunPaused, status, logText(res.State))
			require.Len(t, res.Interrupts, 2)

			ctx := context.Background()
			g, err := h.runner.Runnable()
			require.NoError(t, err)
			values := map[string]any{}
			for _, in := range res.Interrupts {
				var pl EscalationPayload
				require.NoError(t, in.Decode(&pl))
				if all || pl.TaskID == "T1" {
					values[in.ID] = Decision{Action: ActionSkip, Note: "not needed"}
				}
			}
			require.NoError(t, g.Answer(ctx, testRunID, values))

			t5 := task("T5", "Add", []string{"calc/add.go"}, "calc/add_test.go")
			_, err = Replan(ctx, g, testRunID, func(context.Context, []planner.Task) (*planner.Plan, error) {
				return planOf(t1, t2, t5), nil
			}, &ReplanOpts{Apply: true})
			require.NoError(t, err)
			res, err = h.runner.Resume(ctx, testRunID, h.opts())
			require.NoError(t, err)
			log := logText(res.State)
			require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, "T5"), log)
			require.Equal(t, planner.StatusSkipped, taskStatus(t, res.State, "T1"), log)
			require.Contains(t, log, "review: skip T1: not needed")
			if all {
				require.Equal(t, RunPartial, h.status(), log)
				require.Equal(t, planner.StatusSkipped, taskStatus(t, res.State, "T2"))
				return
			}
			require.Equal(t, RunPaused, h.status(), log)
			ps := payloads(t, res)
			require.Len(t, ps, 1)
			require.Equal(t, "T2", ps[0].TaskID, "only the undecided escalation is asked again")
		})
	}
}

// A task the replan changes while the provider had stopped its attempt
// starts afresh with its new fields, rather than go on with the old ones;
// one the replan keeps still goes on.
func TestReplanOfAProviderStoppedTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, err := replanPlan(t, rawTask("T1", "a"), rawTask("T2", "b"))(ctx, nil)
	require.NoError(t, err)
	escs := []Escalation{{TaskID: "T1", Reason: ReasonProvider, Error: "529"}, {TaskID: "T2", Reason: ReasonProvider, Error: "529"}}
	g := replanRun(t, old, nil, NodeVerify, escs)
	var stopped State
	for _, id := range []string{"T1", "T2"} {
		stopped.Attempts.Put(attemptKey(id, 1), Attempt{TaskID: id, Attempt: 1, ProviderError: "529"})
	}
	_, err = g.UpdateState(ctx, "r1", NodeVerify, stopped)
	require.NoError(t, err)
	changed := rawTask("T1", "a")
	changed.Title = "Write a, in full"
	_, err = Replan(ctx, g, "r1", replanPlan(t, changed, rawTask("T2", "b")), &ReplanOpts{Apply: true})
	require.NoError(t, err)
	after, err := g.State(ctx, "r1", -1)
	require.NoError(t, err)
	p := &Pipeline{}
	_, goesOn := p.providerStopped(after.State, "T1")
	require.False(t, goesOn, "the changed task starts afresh")
	_, goesOn = p.providerStopped(after.State, "T2")
	require.True(t, goesOn, "the kept task goes on")
}
