package graph_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
)

// Keys and values that plain Go quoting would store as something JSON
// cannot read: control characters (ANSI colours), quotes, backslashes,
// line separators. A thread that stored one must stay readable.
func TestOddKeysRoundTrip(t *testing.T) {
	t.Parallel()
	keys := []string{"esc\x1b[0m", "bell\a", `quote"back\slash`, "line\u2028sep", "emoji 😀", "tab\tnl\n", "<&>"}
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		run := putRun(t, saver, func(u *state) {
			for i, k := range keys {
				u.Items.Put(k, item{ID: k, Score: float64(i)})
			}
		})
		live, err := run.Invoke(ctx, "keys", state{}, nil)
		require.NoError(t, err)
		stored, err := run.State(ctx, "keys", -1)
		require.NoError(t, err)
		require.Equal(t, keys, stored.State.Items.Keys())
		require.Equal(t, live.State.Items.Values(), stored.State.Items.Values())
	})
}

// A key that is not valid UTF-8 cannot be stored as JSON: the step fails
// naming it, and the thread stays readable.
func TestKeyNotUTF8FailsTheStep(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		run := putRun(t, saver, func(u *state) { u.Items.Put("bad\xff", item{ID: "bad"}) })
		_, err := run.Invoke(ctx, "bad", state{Name: graph.V("kept")}, nil)
		var serr *graph.SerializationError
		require.ErrorAs(t, err, &serr)
		require.Equal(t, "state.items", serr.Path)
		require.ErrorContains(t, err, "not valid UTF-8")
		st, err := run.State(ctx, "bad", -1)
		require.NoError(t, err)
		require.Equal(t, "kept", st.State.Name.Get())
	})
}

type nilState struct {
	List  graph.Value[[]string]  `json:"list"`
	Ptr   graph.Value[*item]     `json:"ptr"`
	Never graph.Value[[]string]  `json:"never"`
	Log   graph.Append[string]   `json:"log"`
	Items graph.Keyed[item]      `json:"items"`
	Name  graph.Value[string]    `json:"name"`
	Empty graph.Value[[]float64] `json:"empty"`
}

// A Value set to nil is set, as it was before the checkpoint; a Value never
// set stays unset. Both read from the snapshot the input is stored in.
func TestValueSetToNilStaysSet(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		g := graph.New[nilState]()
		g.AddNode("a", func(context.Context, nilState) (nilState, error) { return nilState{}, nil }, nil)
		g.AddEdge(graph.START, "a")
		g.AddEdge("a", graph.END)
		run, err := g.Compile(&graph.CompileOpts{Saver: saver})
		require.NoError(t, err)
		in := nilState{List: graph.V([]string(nil)), Ptr: graph.V[*item](nil), Name: graph.V(""), Empty: graph.V([]float64{})}
		_, err = run.Invoke(ctx, "nil", in, nil)
		require.NoError(t, err)
		for _, step := range []int64{0, -1} {
			st, err := run.State(ctx, "nil", step)
			require.NoError(t, err)
			s := st.State
			require.True(t, s.List.IsSet(), "step %d: a Value set to a nil slice", step)
			require.True(t, s.Ptr.IsSet(), "step %d: a Value set to a nil pointer", step)
			require.True(t, s.Name.IsSet(), "step %d", step)
			require.True(t, s.Empty.IsSet(), "step %d", step)
			require.Equal(t, []float64{}, s.Empty.Get())
			require.False(t, s.Never.IsSet(), "step %d: a Value never set", step)
		}
	})
}

// A panicking router is the step's error, like a panicking node, and lets
// go of the thread: another process can go on with it at once.
func TestRouterPanicBecomesError(t *testing.T) {
	t.Parallel()
	forEachSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		var panics atomic.Int32
		build := func(holder string) *graph.Runnable[state] {
			g := graph.New[state]()
			g.AddNode("a", func(context.Context, state) (state, error) {
				var u state
				u.Log.Add("a")
				return u, nil
			}, nil)
			g.AddEdge(graph.START, "a")
			g.AddRouter("a", func(context.Context, state) (string, error) {
				if panics.Add(1) == 1 {
					panic("router boom")
				}
				return graph.END, nil
			}, graph.END)
			run, err := g.Compile(&graph.CompileOpts{Saver: saver, Holder: holder})
			require.NoError(t, err)
			return run
		}
		_, err := build("pid 1, host one").Invoke(ctx, "rp", state{}, nil)
		var nerr *graph.NodeError
		require.ErrorAs(t, err, &nerr)
		require.Equal(t, "a", nerr.Node)
		var perr *graph.PanicError
		require.ErrorAs(t, err, &perr)
		require.Equal(t, "router boom", perr.Value)
		if saver == nil {
			return
		}
		res, err := build("pid 2, host two").Continue(ctx, "rp", nil)
		require.NoError(t, err, "the first holder let the thread go")
		require.Equal(t, graph.StatusDone, res.Status)
		require.Equal(t, []string{"a"}, res.State.Log.Items())
	})
}

// State at the head step tells what State at -1 tells: an interrupted
// thread is interrupted, with its questions.
func TestStateAtHeadStepShowsInterrupts(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		run, res := interruptedRun(t, saver, "head", nil)
		newest, err := run.State(ctx, "head", -1)
		require.NoError(t, err)
		atHead, err := run.State(ctx, "head", res.Step)
		require.NoError(t, err)
		require.Equal(t, graph.StatusInterrupted, atHead.Status)
		require.Equal(t, interruptIDs(newest.Interrupts), interruptIDs(atHead.Interrupts))
		require.Len(t, atHead.Interrupts, 3)

		// Answering a thread with nothing pending says so.
		require.NoError(t, run.Fork(ctx, "head", 0, "head-copy"))
		require.ErrorContains(t, run.Fork(ctx, "head", 0, "head-copy"), "thread head-copy exists already")
		_, err = linearRun(t, saver).Invoke(ctx, "plain", state{}, nil)
		require.NoError(t, err)
		err = linearRun(t, saver).Answer(ctx, "plain", map[string]any{"1/a#0/0": "x"})
		require.ErrorContains(t, err, `no interrupt is pending, so "1/a#0/0" cannot be answered`)
		require.ErrorIs(t, err, graph.ErrNotPending, "a review that lost a race can tell")
	})
}

func linearRun(t *testing.T, saver checkpoint.Saver) *graph.Runnable[state] {
	run, err := linear(t).Compile(&graph.CompileOpts{Saver: saver})
	require.NoError(t, err)
	return run
}

// putRun compiles a graph whose one node writes what put sets.
func putRun(t *testing.T, saver checkpoint.Saver, put func(u *state)) *graph.Runnable[state] {
	g := graph.New[state]()
	g.AddNode("put", func(context.Context, state) (state, error) {
		var u state
		put(&u)
		return u, nil
	}, nil)
	g.AddEdge(graph.START, "put")
	g.AddEdge("put", graph.END)
	run, err := g.Compile(&graph.CompileOpts{Saver: saver})
	require.NoError(t, err)
	return run
}

// damagedWrites hands out the pending writes with their payloads cut
// short, as a damaged row would be.
type damagedWrites struct{ checkpoint.Saver }

func (d damagedWrites) Load(ctx context.Context, threadID string, step int64) (checkpoint.Loaded, error) {
	l, err := d.Saver.Load(ctx, threadID, step)
	for i := range l.Writes {
		l.Writes[i].Payload = l.Writes[i].Payload[:len(l.Writes[i].Payload)/2]
	}
	return l, err
}

// A damaged pending write is damage to its step, found before any task
// runs again, and named with the step so that a resume can go on from the
// checkpoint before it.
func TestDamagedPendingWriteFoundFirst(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		ctx := context.Background()
		var calls atomic.Int32
		run, err := fanOutGraph(t, 3, func(int) { calls.Add(1) }).Compile(&graph.CompileOpts{Saver: &failingSaver{Saver: saver, failStep: 2}})
		require.NoError(t, err)
		_, err = run.Invoke(ctx, "dmg", state{}, nil)
		require.ErrorContains(t, err, "simulated crash")
		require.Equal(t, int32(3), calls.Load())

		damaged, err := fanOutGraph(t, 3, func(int) { calls.Add(1) }).Compile(&graph.CompileOpts{Saver: damagedWrites{saver}})
		require.NoError(t, err)
		for _, read := range []func() error{
			func() error { _, err := damaged.Continue(ctx, "dmg", nil); return err },
			func() error { _, err := damaged.State(ctx, "dmg", -1); return err },
		} {
			err = read()
			var derr *checkpoint.DecodeError
			require.ErrorAs(t, err, &derr)
			require.Equal(t, int64(2), derr.Step, "the pending step")
			require.ErrorContains(t, err, "pending update of task work#")
		}
		require.Equal(t, int32(3), calls.Load(), "nothing ran again")
	})
}
