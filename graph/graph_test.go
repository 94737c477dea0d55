package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/testkit"
)

type item struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

type state struct {
	Name  graph.Value[string]  `json:"name"`
	Count graph.Value[int]     `json:"count"`
	Log   graph.Append[string] `json:"log"`
	Items graph.Keyed[item]    `json:"items"`
}

func noop(context.Context, state) (state, error) { return state{}, nil }

func TestBuilderChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		build func(g *graph.Graph[state])
		want  string
	}{
		{"duplicate node", func(g *graph.Graph[state]) { g.AddNode("a", noop, nil); g.AddNode("a", noop, nil) }, `node "a" is added twice`},
		{"reserved name", func(g *graph.Graph[state]) { g.AddNode(graph.END, noop, nil) }, `node name "__end__" is reserved`},
		{"edge to unknown", func(g *graph.Graph[state]) { g.AddEdge(graph.START, "x") }, `unknown node "x"`},
		{"edge from END", func(g *graph.Graph[state]) { g.AddNode("a", noop, nil); g.AddEdge(graph.END, "a") }, "edge from END"},
		{"edge to START", func(g *graph.Graph[state]) { g.AddNode("a", noop, nil); g.AddEdge("a", graph.START) }, "edge to START"},
		{"router target unknown", func(g *graph.Graph[state]) {
			g.AddNode("a", noop, nil)
			g.AddEdge(graph.START, "a")
			g.AddRouter("a", func(context.Context, state) (string, error) { return graph.END, nil }, graph.END, "nope")
		}, `unknown target "nope"`},
		{"unreachable node", func(g *graph.Graph[state]) {
			g.AddNode("a", noop, nil)
			g.AddNode("b", noop, nil)
			g.AddEdge(graph.START, "a")
			g.AddEdge("a", graph.END)
		}, `node "b" is not reachable from START`},
		{"END unreachable", func(g *graph.Graph[state]) {
			g.AddNode("a", noop, nil)
			g.AddNode("b", noop, nil)
			g.AddEdge(graph.START, "a")
			g.AddEdge("a", "b")
			g.AddEdge("b", "a")
		}, "END is not reachable"},
		{"first error sticks", func(g *graph.Graph[state]) {
			g.AddEdge(graph.START, "missing")
			g.AddNode("a", noop, nil)
			g.AddNode("a", noop, nil)
		}, `unknown node "missing"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := graph.New[state]()
			tc.build(g)
			_, err := g.Compile(nil)
			require.ErrorIs(t, err, graph.ErrInvalidGraph)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestStateTypeMustUseChannels(t *testing.T) {
	t.Parallel()
	type bad struct{ N int }
	_, err := graph.New[bad]().Compile(nil)
	require.ErrorContains(t, err, "use graph.Value[int]")
}

func TestChangeAfterCompile(t *testing.T) {
	t.Parallel()
	g := linear(t)
	_, err := g.Compile(nil)
	require.NoError(t, err)
	require.ErrorContains(t, g.AddNode("late", noop, nil), "graph is compiled")
}

func linear(t *testing.T) *graph.Graph[state] {
	g := graph.New[state]()
	require.NoError(t, g.AddNode("a", func(_ context.Context, s state) (state, error) {
		var u state
		u.Count.Set(s.Count.Get() + 1)
		u.Log.Add("a")
		return u, nil
	}, nil))
	require.NoError(t, g.AddEdge(graph.START, "a"))
	require.NoError(t, g.AddEdge("a", graph.END))
	return g
}

func TestStepLimit(t *testing.T) {
	t.Parallel()
	g := graph.New[state]()
	g.AddNode("spin", func(_ context.Context, s state) (state, error) {
		var u state
		u.Count.Set(s.Count.Get() + 1)
		return u, nil
	}, nil)
	g.AddEdge(graph.START, "spin")
	g.AddRouter("spin", func(context.Context, state) (string, error) { return "spin", nil }, "spin", graph.END)
	run, err := g.Compile(&graph.CompileOpts{StepLimit: 7})
	require.NoError(t, err)
	res, err := run.Invoke(context.Background(), "t", state{}, nil)
	require.ErrorIs(t, err, graph.ErrStepLimit)
	require.Equal(t, 7, res.State.Count.Get())
	require.Equal(t, graph.StatusPending, res.Status)
}

// fanOutGraph sends n instances of "work", each with its own input; the
// instances finish in reverse order of their index, and "join" runs once.
func fanOutGraph(t *testing.T, n int, release func(i int)) *graph.Graph[state] {
	g := graph.New[state]()
	require.NoError(t, g.AddNode("plan", noop, nil))
	require.NoError(t, graph.AddInputNode(g, "work", func(_ context.Context, s state, i int) (state, error) {
		if release != nil {
			release(i)
		}
		var u state
		u.Log.Add(fmt.Sprintf("work %d", i))
		u.Items.Put(fmt.Sprintf("k%d", i), item{ID: fmt.Sprint(i), Score: float64(i)})
		u.Name.Set(fmt.Sprintf("last writer %d", i))
		return u, nil
	}, nil))
	require.NoError(t, g.AddNode("join", func(_ context.Context, s state) (state, error) {
		var u state
		u.Log.Add(fmt.Sprintf("join sees %d items", s.Items.Len()))
		return u, nil
	}, nil))
	g.AddEdge(graph.START, "plan")
	g.AddFanOut("plan", func(context.Context, state) ([]graph.Send, error) {
		var out []graph.Send
		for i := range n {
			out = append(out, graph.Send{Node: "work", Input: i})
		}
		return out, nil
	}, "work")
	g.AddEdge("work", "join")
	g.AddEdge("join", graph.END)
	return g
}

// reverseOrder makes instance i finish only after instance i+1 has.
func reverseOrder(n int) func(int) {
	done := make([]chan struct{}, n+1)
	for i := range done {
		done[i] = make(chan struct{})
	}
	close(done[n])
	return func(i int) {
		<-done[i+1]
		close(done[i])
	}
}

func TestFanOutMergesInTaskOrder(t *testing.T) {
	t.Parallel()
	forEachSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		const n = 5
		run, err := fanOutGraph(t, n, reverseOrder(n)).Compile(&graph.CompileOpts{Saver: saver})
		require.NoError(t, err)
		res, err := run.Invoke(context.Background(), "fan", state{}, nil)
		require.NoError(t, err)
		require.Equal(t, graph.StatusDone, res.Status)
		want := []string{"work 0", "work 1", "work 2", "work 3", "work 4", "join sees 5 items"}
		require.Equal(t, want, res.State.Log.Items(), "updates merge in send order, not finish order")
		require.Equal(t, []string{"k0", "k1", "k2", "k3", "k4"}, res.State.Items.Keys())
		require.Equal(t, "last writer 4", res.State.Name.Get())
		if saver != nil {
			// The state read back from the checkpoints is the same.
			back, err := run.State(context.Background(), "fan", -1)
			require.NoError(t, err)
			require.Equal(t, res.State.Log.Items(), back.State.Log.Items())
			require.Equal(t, res.State.Items.Keys(), back.State.Items.Keys())
		}
	})
}

func TestReducers(t *testing.T) {
	t.Parallel()
	forEachSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		g := graph.New[state]()
		g.AddNode("one", func(_ context.Context, s state) (state, error) {
			var u state
			u.Name.Set("one")
			u.Log.Add("x", "y")
			u.Items.Put("a", item{ID: "a", Score: 1})
			u.Items.Put("b", item{ID: "b", Score: 2})
			return u, nil
		}, nil)
		g.AddNode("two", func(_ context.Context, s state) (state, error) {
			var u state
			u.Log.Add("z")
			u.Items.Put("a", item{ID: "a", Score: 10})
			u.Items.Delete("b")
			u.Items.Put("c", item{ID: "c", Score: 3})
			return u, nil
		}, nil)
		g.AddEdge(graph.START, "one")
		g.AddEdge("one", "two")
		g.AddEdge("two", graph.END)
		run, err := g.Compile(&graph.CompileOpts{Saver: saver})
		require.NoError(t, err)
		res, err := run.Invoke(context.Background(), "r", state{Name: graph.V("input"), Count: graph.V(7)}, nil)
		require.NoError(t, err)
		s := res.State
		require.Equal(t, "one", s.Name.Get(), "replace")
		require.Equal(t, 7, s.Count.Get(), "unwritten value kept")
		require.Equal(t, []string{"x", "y", "z"}, s.Log.Items(), "append")
		require.Equal(t, []string{"a", "c"}, s.Items.Keys(), "keyed: delete and add")
		a, _ := s.Items.Get("a")
		require.Equal(t, 10.0, a.Score, "keyed: replace by key")
		if saver != nil {
			back, err := run.State(context.Background(), "r", -1)
			require.NoError(t, err)
			require.Equal(t, s.Items.Values(), back.State.Items.Values())
			require.Equal(t, s.Log.Items(), back.State.Log.Items())
		}
	})
}

// interruptGraph fans out to two askers; asker 1 asks two questions.
func interruptGraph(t *testing.T, runs *atomic.Int32) *graph.Graph[state] {
	g := graph.New[state]()
	g.AddNode("start", noop, nil)
	graph.AddInputNode(g, "ask", func(ctx context.Context, s state, i int) (state, error) {
		runs.Add(1)
		var u state
		a, err := graph.Interrupt[string](ctx, fmt.Sprintf("question %d.a", i))
		if i == 1 {
			// A second question, asked even when the first is pending.
			b, err2 := graph.Interrupt[string](ctx, fmt.Sprintf("question %d.b", i))
			if err := errors.Join(err, err2); err != nil {
				return u, err
			}
			a += "+" + b
		}
		if err != nil {
			return u, err
		}
		u.Log.Add(fmt.Sprintf("ask %d got %s", i, a))
		return u, nil
	}, nil)
	g.AddNode("done", func(_ context.Context, s state) (state, error) {
		var u state
		u.Log.Add("done")
		return u, nil
	}, nil)
	g.AddEdge(graph.START, "start")
	g.AddFanOut("start", func(context.Context, state) ([]graph.Send, error) {
		return []graph.Send{{Node: "ask", Input: 0}, {Node: "ask", Input: 1}}, nil
	}, "ask")
	g.AddEdge("ask", "done")
	g.AddEdge("done", graph.END)
	return g
}

func TestInterruptsInParallelBranches(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		var runs atomic.Int32
		run, res := interruptedRun(t, saver, "ints", &runs)
		ids := interruptIDs(res.Interrupts)
		require.Equal(t, []string{"2/ask#0/0", "2/ask#1/0", "2/ask#1/1"}, ids)
		var q string
		require.NoError(t, res.Interrupts[2].Decode(&q))
		require.Equal(t, "question 1.b", q)

		// An unknown ID is refused and names the pending ones.
		_, err := run.Resume(ctx, "ints", map[string]any{"9/x#0/0": "?"}, nil)
		require.ErrorContains(t, err, `no pending interrupt "9/x#0/0"`)

		// Answer branch 0 and half of branch 1: branch 0 completes, branch 1
		// does not run again, and the run stays interrupted.
		// The interrupt event names only the question still open.
		runs.Store(0)
		var raised []string
		res, err = run.Resume(ctx, "ints", map[string]any{ids[0]: "A", ids[1]: "B"}, &graph.RunOpts{EventFunc: func(e graph.Event) {
			if e.Kind == graph.EventInterrupt {
				raised = append(raised, interruptIDs(e.Interrupts)...)
			}
		}})
		require.NoError(t, err)
		require.Equal(t, graph.StatusInterrupted, res.Status)
		require.Equal(t, []string{"2/ask#1/1"}, interruptIDs(res.Interrupts))
		require.Equal(t, []string{"2/ask#1/1"}, raised)
		require.Len(t, res.Answered, 1, "branch 1's first answer waits for its second")
		require.Equal(t, "2/ask#1/0", res.Answered[0].ID)
		require.JSONEq(t, `"B"`, string(res.Answered[0].Answer))
		require.Equal(t, int32(1), runs.Load(), "only the fully answered branch runs")

		// The last answer: branch 1 runs, branch 0's recorded result is used.
		// Answer records the last answer without running anything;
		// Continue acts on it.
		runs.Store(0)
		require.NoError(t, run.Answer(ctx, "ints", map[string]any{ids[2]: "C"}))
		require.Equal(t, int32(0), runs.Load())
		st, err := run.State(ctx, "ints", -1)
		require.NoError(t, err)
		require.Equal(t, graph.StatusPending, st.Status)
		res, err = run.Continue(ctx, "ints", nil)
		require.NoError(t, err)
		require.Equal(t, graph.StatusDone, res.Status)
		require.Equal(t, int32(1), runs.Load())
		require.Equal(t, []string{"ask 0 got A", "ask 1 got B+C", "done"}, res.State.Log.Items())
	})
}

// interruptedRun invokes interruptGraph on thread id, which stops
// interrupted; runs counts the runs of its asking node.
func interruptedRun(t *testing.T, saver checkpoint.Saver, id string, runs *atomic.Int32) (*graph.Runnable[state], graph.Result[state]) {
	t.Helper()
	if runs == nil {
		runs = new(atomic.Int32)
	}
	run, err := interruptGraph(t, runs).Compile(&graph.CompileOpts{Saver: saver})
	require.NoError(t, err)
	res, err := run.Invoke(context.Background(), id, state{}, nil)
	require.NoError(t, err)
	require.Equal(t, graph.StatusInterrupted, res.Status)
	return run, res
}

func interruptIDs(ints []graph.Interruption) []string {
	var ids []string
	for _, in := range ints {
		ids = append(ids, in.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestBranchFailureKeepsSiblingWrites: when one branch of a parallel step
// fails, the others' writes are stored and only the failed branch runs on
// Continue.
func TestBranchFailureKeepsSiblingWrites(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		var mu sync.Mutex
		calls := map[int]int{}
		failing := atomic.Bool{}
		failing.Store(true)
		g := graph.New[state]()
		g.AddNode("start", noop, nil)
		graph.AddInputNode(g, "work", func(_ context.Context, s state, i int) (state, error) {
			mu.Lock()
			calls[i]++
			mu.Unlock()
			if i == 1 && failing.Load() {
				return state{}, errors.New("flaky")
			}
			var u state
			u.Log.Add(fmt.Sprintf("work %d", i))
			return u, nil
		}, nil)
		g.AddEdge(graph.START, "start")
		g.AddFanOut("start", func(context.Context, state) ([]graph.Send, error) {
			return []graph.Send{{Node: "work", Input: 0}, {Node: "work", Input: 1}, {Node: "work", Input: 2}}, nil
		}, "work")
		g.AddEdge("work", graph.END)
		run, err := g.Compile(&graph.CompileOpts{Saver: saver})
		require.NoError(t, err)
		_, err = run.Invoke(ctx, "bf", state{}, nil)
		var nerr *graph.NodeError
		require.ErrorAs(t, err, &nerr)
		require.Equal(t, "work", nerr.Node)
		require.Equal(t, "work#1", nerr.TaskID)
		require.ErrorContains(t, err, "flaky")

		st, err := run.State(ctx, "bf", -1)
		require.NoError(t, err)
		require.Equal(t, graph.StatusPending, st.Status)

		failing.Store(false)
		res, err := run.Continue(ctx, "bf", nil)
		require.NoError(t, err)
		require.Equal(t, graph.StatusDone, res.Status)
		require.Equal(t, map[int]int{0: 1, 1: 2, 2: 1}, calls, "only the failed branch ran again")
		require.Equal(t, []string{"work 0", "work 1", "work 2"}, res.State.Log.Items())
	})
}

// failingSaver fails the Put of one step, simulating a crash between the
// pending writes and the checkpoint.
type failingSaver struct {
	checkpoint.Saver
	failStep int64
}

func (f *failingSaver) Put(ctx context.Context, l checkpoint.Lease, cp checkpoint.Checkpoint) error {
	if cp.Step == f.failStep {
		f.failStep = -1
		return errors.New("simulated crash")
	}
	return f.Saver.Put(ctx, l, cp)
}

func TestCrashBetweenWritesAndCheckpoint(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		var calls atomic.Int32
		fs := &failingSaver{Saver: saver, failStep: 2}
		g := fanOutGraph(t, 3, func(int) { calls.Add(1) })
		run, err := g.Compile(&graph.CompileOpts{Saver: fs})
		require.NoError(t, err)
		_, err = run.Invoke(ctx, "crash", state{}, nil)
		require.ErrorContains(t, err, "simulated crash")
		require.Equal(t, int32(3), calls.Load())
		// All three branch results were recorded before the checkpoint
		// failed, so none runs again.
		res, err := run.Continue(ctx, "crash", nil)
		require.NoError(t, err)
		require.Equal(t, int32(3), calls.Load())
		require.Equal(t, []string{"work 0", "work 1", "work 2", "join sees 3 items"}, res.State.Log.Items())
	})
}

// A run stopped in its first step, before any node finished (Ctrl-C
// while the plan is made), goes on from START's nodes; it used to read as
// done, with nothing run.
func TestStoppedInTheFirstStep(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		var calls atomic.Int32
		// Ctrl-C comes while the first node runs (not after a fixed time,
		// which a loaded machine may spend before the node starts).
		ctx, cancel := context.WithCancel(context.Background())
		g := graph.New[state]()
		g.AddNode("plan", func(ctx context.Context, s state) (state, error) {
			if calls.Add(1) == 1 {
				cancel()
				<-ctx.Done()
				return state{}, ctx.Err()
			}
			var u state
			u.Log.Add("planned")
			return u, nil
		}, nil)
		g.AddEdge(graph.START, "plan")
		g.AddEdge("plan", graph.END)
		run, err := g.Compile(&graph.CompileOpts{Saver: saver})
		require.NoError(t, err)
		_, err = run.Invoke(ctx, "first", state{}, nil)
		require.Error(t, err)
		res, err := run.Continue(context.Background(), "first", nil)
		require.NoError(t, err)
		require.Equal(t, int32(2), calls.Load())
		require.Equal(t, graph.StatusDone, res.Status)
		require.Equal(t, []string{"planned"}, res.State.Log.Items())
	})
}

// ghostSaver stores the input checkpoint with a next task the graph does
// not have: damage that still decodes.
type ghostSaver struct{ checkpoint.Saver }

func (g ghostSaver) Put(ctx context.Context, l checkpoint.Lease, cp checkpoint.Checkpoint) error {
	if cp.Source == "input" {
		cp.Next = []byte(`[{"n":"ghost"}]`)
	}
	return g.Saver.Put(ctx, l, cp)
}

// A checkpoint whose next task names a node the graph lacks is reported
// as a damaged checkpoint, naming it, not as a failing node.
func TestCheckpointNamingAMissingNode(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		g := graph.New[state]()
		g.AddNode("a", func(context.Context, state) (state, error) { return state{}, errors.New("stop here") }, nil)
		g.AddEdge(graph.START, "a")
		g.AddEdge("a", graph.END)
		run, err := g.Compile(&graph.CompileOpts{Saver: ghostSaver{saver}})
		require.NoError(t, err)
		_, err = run.Invoke(context.Background(), "ghost", state{}, nil)
		require.Error(t, err)
		_, err = run.Continue(context.Background(), "ghost", nil)
		var de *checkpoint.DecodeError
		require.ErrorAs(t, err, &de)
		require.Equal(t, int64(0), de.Step)
		require.ErrorContains(t, err, `the graph has no node "ghost"`)
	})
}

func TestRetryPolicyOnInjectedClock(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var attempts atomic.Int32
	g := graph.New[state]()
	g.AddNode("flaky", func(_ context.Context, s state) (state, error) {
		if attempts.Add(1) < 3 {
			return state{}, errors.New("temporary")
		}
		var u state
		u.Log.Add("ok")
		return u, nil
	}, &graph.NodeOpts{Retry: &graph.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second, Multiplier: 3}})
	g.AddEdge(graph.START, "flaky")
	g.AddEdge("flaky", graph.END)
	run, err := g.Compile(&graph.CompileOpts{Clock: clock})
	require.NoError(t, err)
	var events []graph.Event
	res, err := run.Invoke(context.Background(), "retry", state{}, &graph.RunOpts{EventFunc: func(e graph.Event) {
		events = append(events, e)
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"ok"}, res.State.Log.Items())
	require.Equal(t, []time.Duration{time.Second, 3 * time.Second}, clock.Waits())
	var kinds []graph.EventKind
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []graph.EventKind{
		graph.EventStepStart,
		graph.EventNodeStart, graph.EventNodeEnd, graph.EventRetry,
		graph.EventNodeStart, graph.EventNodeEnd, graph.EventRetry,
		graph.EventNodeStart, graph.EventNodeEnd, graph.EventUpdate,
		graph.EventStepEnd,
	}, kinds)
	require.Equal(t, "temporary", events[2].Error)
}

func TestRetryIfFuncStopsRetries(t *testing.T) {
	t.Parallel()
	permanent := errors.New("permanent")
	var attempts atomic.Int32
	g := graph.New[state]()
	g.AddNode("n", func(context.Context, state) (state, error) {
		attempts.Add(1)
		return state{}, permanent
	}, &graph.NodeOpts{Retry: &graph.RetryPolicy{MaxAttempts: 5, RetryIfFunc: func(err error) bool { return !errors.Is(err, permanent) }}})
	g.AddEdge(graph.START, "n")
	g.AddEdge("n", graph.END)
	run, err := g.Compile(nil)
	require.NoError(t, err)
	_, err = run.Invoke(context.Background(), "x", state{}, nil)
	require.ErrorIs(t, err, permanent)
	require.Equal(t, int32(1), attempts.Load())
}

func TestNodePanicBecomesError(t *testing.T) {
	t.Parallel()
	g := graph.New[state]()
	g.AddNode("boom", func(context.Context, state) (state, error) { panic("kaboom") }, nil)
	g.AddEdge(graph.START, "boom")
	g.AddEdge("boom", graph.END)
	run, err := g.Compile(nil)
	require.NoError(t, err)
	_, err = run.Invoke(context.Background(), "p", state{}, nil)
	var nerr *graph.NodeError
	require.ErrorAs(t, err, &nerr)
	require.Equal(t, "boom", nerr.Node)
	require.EqualError(t, err, "node boom: panic: kaboom", "one line; the stack is apart")
	var perr *graph.PanicError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, "kaboom", perr.Value)
	require.Contains(t, string(perr.Stack), "graph_test.go", "the stack names where it panicked")
}

func TestSerializationErrorNamesPath(t *testing.T) {
	t.Parallel()
	g := graph.New[state]()
	g.AddNode("bad", func(context.Context, state) (state, error) {
		var u state
		u.Items.Put("ok", item{ID: "ok"})
		u.Items.Put("t7", item{ID: "t7", Score: math.NaN()})
		return u, nil
	}, nil)
	g.AddEdge(graph.START, "bad")
	g.AddEdge("bad", graph.END)
	run, err := g.Compile(&graph.CompileOpts{Saver: checkpoint.NewMemory()})
	require.NoError(t, err)
	_, err = run.Invoke(context.Background(), "ser", state{}, nil)
	var serr *graph.SerializationError
	require.ErrorAs(t, err, &serr)
	require.Equal(t, `state.items["t7"].score`, serr.Path)
}

func TestHistoryForkUpdatePrune(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		g := counter(10)
		run, err := g.Compile(&graph.CompileOpts{Saver: saver})
		require.NoError(t, err)
		_, err = run.Invoke(ctx, "h", state{}, nil)
		require.NoError(t, err)

		hist, err := run.History(ctx, "h", 0)
		require.NoError(t, err)
		require.Len(t, hist, 11)
		require.Equal(t, int64(10), hist[0].Step)
		require.Equal(t, "input", hist[10].Source)
		require.Equal(t, []string{"inc"}, hist[0].Writers)

		at4, err := run.State(ctx, "h", 4)
		require.NoError(t, err)
		require.Equal(t, 4, at4.State.Count.Get())
		require.Equal(t, []string{"inc"}, at4.Next)

		// A fork from step 4 runs on by itself; the original is untouched.
		require.NoError(t, run.Fork(ctx, "h", 4, "h-fork"))
		res, err := run.Continue(ctx, "h-fork", nil)
		require.NoError(t, err)
		require.Equal(t, 10, res.State.Count.Get())
		require.Len(t, res.State.Log.Items(), 10)

		// A human fixes the state as if "inc" wrote it, and the graph goes
		// on from inc's successors.
		_, err = run.UpdateState(ctx, "h-fork", "inc", state{Count: graph.V(8)})
		require.NoError(t, err)
		res, err = run.Continue(ctx, "h-fork", nil)
		require.NoError(t, err)
		require.Equal(t, 10, res.State.Count.Get())
		require.Equal(t, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "9", "10"}, res.State.Log.Items())

		// Pruning keeps the newest checkpoints readable.
		before, err := run.State(ctx, "h", 8)
		require.NoError(t, err)
		require.NoError(t, run.Prune(ctx, "h", 3))
		hist, err = run.History(ctx, "h", 0)
		require.NoError(t, err)
		require.Len(t, hist, 3)
		after, err := run.State(ctx, "h", 8)
		require.NoError(t, err)
		require.Equal(t, before.State.Log.Items(), after.State.Log.Items())
		_, err = run.State(ctx, "h", 2)
		require.ErrorIs(t, err, checkpoint.ErrNotFound)
	})
}

// TestLeaseRefusesSecondDriver: while one process drives a thread, a second
// gets ErrThreadBusy naming the holder.
func TestLeaseRefusesSecondDriver(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		entered, release := make(chan struct{}), make(chan struct{})
		g := graph.New[state]()
		g.AddNode("slow", func(context.Context, state) (state, error) {
			close(entered)
			<-release
			return state{}, nil
		}, nil)
		g.AddEdge(graph.START, "slow")
		g.AddEdge("slow", graph.END)
		first, err := g.Compile(&graph.CompileOpts{Saver: saver, Holder: "pid 1, host first"})
		require.NoError(t, err)
		second, err := linear(t).Compile(&graph.CompileOpts{Saver: saver, Holder: "pid 2, host second"})
		require.NoError(t, err)
		done := make(chan error)
		go func() {
			_, err := first.Invoke(ctx, "busy", state{}, nil)
			done <- err
		}()
		<-entered
		_, err = second.Continue(ctx, "busy", nil)
		require.ErrorIs(t, err, checkpoint.ErrThreadBusy)
		require.ErrorContains(t, err, "pid 1, host first")
		close(release)
		require.NoError(t, <-done)
		// Released: the second may drive it now.
		_, err = second.Continue(ctx, "busy", nil)
		require.NoError(t, err)
	})
}

// TestDeltasAfterManySteps reads back a state built from 1,000 steps of
// deltas and checks that storage grows with what changed.
func TestDeltasAfterManySteps(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		const steps = 1000
		counting := &countingSaver{Saver: saver}
		g := graph.New[state]()
		g.AddNode("touch", func(_ context.Context, s state) (state, error) {
			var u state
			n := s.Count.Get()
			u.Count.Set(n + 1)
			u.Items.Put(fmt.Sprintf("k%03d", n%1000), item{ID: fmt.Sprint(n), Score: float64(n)})
			return u, nil
		}, nil)
		g.AddEdge(graph.START, "touch")
		g.AddRouter("touch", func(_ context.Context, s state) (string, error) {
			if s.Count.Get() < steps {
				return "touch", nil
			}
			return graph.END, nil
		}, "touch", graph.END)
		run, err := g.Compile(&graph.CompileOpts{Saver: counting, StepLimit: steps + 1})
		require.NoError(t, err)
		in := state{}
		for i := range 1000 {
			in.Items.Put(fmt.Sprintf("k%03d", i), item{ID: "init"})
		}
		res, err := run.Invoke(ctx, "many", in, nil)
		require.NoError(t, err)
		back, err := run.State(ctx, "many", -1)
		require.NoError(t, err)
		require.Equal(t, steps, back.State.Count.Get())
		require.Equal(t, res.State.Items.Values(), back.State.Items.Values())
		mid, err := run.State(ctx, "many", 500)
		require.NoError(t, err)
		v, _ := mid.State.Items.Get("k499")
		require.Equal(t, "499", v.ID)
		v, _ = mid.State.Items.Get("k500")
		require.Equal(t, "init", v.ID)
		full, err := json.Marshal(res.State)
		require.NoError(t, err)
		perStep := float64(counting.bytes.Load()) / steps
		t.Logf("state %d B, stored %.0f B/step", len(full), perStep)
		require.Less(t, perStep, float64(len(full))/10, "a step stores far less than the state")
	})
}

// TestDeadHolderTakenOver: a lease whose holder is a process of this host
// that no longer exists is taken over at once, before it expires.
func TestDeadHolderTakenOver(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		run, err := linear(t).Compile(&graph.CompileOpts{Saver: saver})
		require.NoError(t, err)
		_, err = run.Invoke(ctx, "dead", state{}, nil)
		require.NoError(t, err)
		// A process that died holding the thread: a pid that cannot exist.
		host, err := os.Hostname()
		require.NoError(t, err)
		dead := fmt.Sprintf("pid %d, host %s", 1<<30, host)
		_, err = saver.Acquire(ctx, "dead", dead, time.Now(), time.Hour)
		require.NoError(t, err)
		// A live holder elsewhere is respected.
		alive := "pid 1, host another-host"
		_, err = saver.Acquire(ctx, "alive", alive, time.Now(), time.Hour)
		require.NoError(t, err)

		_, err = run.Invoke(ctx, "dead", state{}, nil)
		require.NoError(t, err, "the dead holder's lease is taken over")
		_, err = run.Invoke(ctx, "alive", state{}, nil)
		require.ErrorIs(t, err, checkpoint.ErrThreadBusy)
		require.ErrorContains(t, err, alive)
	})
}

// TestAsyncDurability: with DurabilityAsync the checkpoints are written
// while the next step runs, and all of them are stored when the call
// returns.
func TestAsyncDurability(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		g := counter(50)
		run, err := g.Compile(&graph.CompileOpts{Saver: saver, Durability: graph.DurabilityAsync})
		require.NoError(t, err)
		res, err := run.Invoke(ctx, "async", state{}, nil)
		require.NoError(t, err)
		require.Equal(t, 50, res.State.Count.Get())
		hist, err := run.History(ctx, "async", 0)
		require.NoError(t, err)
		require.Len(t, hist, 51, "every step is stored before Invoke returns")
		back, err := run.State(ctx, "async", -1)
		require.NoError(t, err)
		require.Equal(t, res.State.Log.Items(), back.State.Log.Items())
		require.Equal(t, graph.StatusDone, back.Status)
	})
}

// counter is a loop of one node, "inc", that counts to limit and logs
// each number.
func counter(limit int) *graph.Graph[state] {
	g := graph.New[state]()
	g.AddNode("inc", func(_ context.Context, s state) (state, error) {
		var u state
		u.Count.Set(s.Count.Get() + 1)
		u.Log.Add(fmt.Sprint(s.Count.Get() + 1))
		return u, nil
	}, nil)
	g.AddEdge(graph.START, "inc")
	g.AddRouter("inc", func(_ context.Context, s state) (string, error) {
		if s.Count.Get() < limit {
			return "inc", nil
		}
		return graph.END, nil
	}, "inc", graph.END)
	return g
}
