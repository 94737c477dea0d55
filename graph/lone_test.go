package graph_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
)

// TestLoneStepsMatchTheGeneralPath runs graphs whose steps have one task
// each, without a saver, once without events (the runtime's short path for
// such steps) and once with them (its general path), and checks that both
// end the same: the state, the status, the pending interrupts and the
// error.
func TestLoneStepsMatchTheGeneralPath(t *testing.T) {
	t.Parallel()
	failed := errors.New("failed")
	count := func(s state) state {
		var u state
		u.Count.Set(s.Count.Get() + 1)
		return u
	}
	logged := func(line string) graph.NodeFunc[state] {
		return func(_ context.Context, s state) (state, error) {
			u := count(s)
			u.Log.Add(line)
			return u, nil
		}
	}
	cases := []struct {
		name    string
		build   func(g *graph.Graph[state])
		errText string
	}{
		{name: "loop until a router ends it", build: func(g *graph.Graph[state]) {
			g.AddNode("a", logged("a"), nil)
			g.AddNode("b", logged("b"), nil)
			g.AddEdge(graph.START, "a")
			g.AddEdge("a", "b")
			g.AddRouter("b", func(_ context.Context, s state) (string, error) {
				if s.Count.Get() < 6 {
					return "a", nil
				}
				return graph.END, nil
			}, "a", graph.END)
		}},
		{name: "a node reached twice from one task runs once", build: func(g *graph.Graph[state]) {
			g.AddNode("a", logged("a"), nil)
			g.AddNode("b", logged("b"), nil)
			g.AddEdge(graph.START, "a")
			g.AddEdge("a", "b")
			g.AddRouter("a", func(context.Context, state) (string, error) { return "b", nil }, "b")
			g.AddEdge("b", graph.END)
		}},
		{name: "static fan-out and join, looped", build: func(g *graph.Graph[state]) {
			// a's two edges are a list the graph holds, which a lone step
			// borrows; the steps of b and c, and of d, build theirs in
			// the thread's buffers, which must never be a's list.
			for _, name := range []string{"a", "b", "c", "d"} {
				g.AddNode(name, logged(name), nil)
			}
			g.AddEdge(graph.START, "a")
			g.AddEdge("a", "b")
			g.AddEdge("a", "c")
			g.AddEdge("b", "d")
			g.AddEdge("c", "d")
			g.AddRouter("d", func(_ context.Context, s state) (string, error) {
				if s.Count.Get() < 12 {
					return "a", nil
				}
				return graph.END, nil
			}, "a", graph.END)
		}},
		{name: "node error", build: func(g *graph.Graph[state]) {
			g.AddNode("a", logged("a"), nil)
			g.AddNode("bad", func(context.Context, state) (state, error) { return state{}, failed }, nil)
			g.AddEdge(graph.START, "a")
			g.AddEdge("a", "bad")
			g.AddEdge("bad", graph.END)
		}, errText: "node bad: failed"},
		{name: "node panic", build: func(g *graph.Graph[state]) {
			g.AddNode("boom", func(context.Context, state) (state, error) { panic("kaboom") }, nil)
			g.AddEdge(graph.START, "boom")
			g.AddEdge("boom", graph.END)
		}, errText: "node boom: panic: kaboom"},
		{name: "router panic", build: func(g *graph.Graph[state]) {
			g.AddNode("a", logged("a"), nil)
			g.AddEdge(graph.START, "a")
			g.AddRouter("a", func(context.Context, state) (string, error) { panic("lost") }, graph.END)
		}, errText: "node a: router: panic: lost"},
		{name: "router names a node it may not reach", build: func(g *graph.Graph[state]) {
			g.AddNode("a", logged("a"), nil)
			g.AddEdge(graph.START, "a")
			g.AddRouter("a", func(context.Context, state) (string, error) { return "z", nil }, graph.END)
		}, errText: `router returned "z"`},
		{name: "interrupt", build: func(g *graph.Graph[state]) {
			g.AddNode("a", logged("a"), nil)
			g.AddNode("ask", func(ctx context.Context, s state) (state, error) {
				name, err := graph.Interrupt[string](ctx, "name?")
				if err != nil {
					return state{}, err
				}
				var u state
				u.Name.Set(name)
				return u, nil
			}, nil)
			g.AddEdge(graph.START, "a")
			g.AddEdge("a", "ask")
			g.AddEdge("ask", graph.END)
		}},
		{name: "retries", build: func(g *graph.Graph[state]) {
			tries := 0
			g.AddNode("flaky", func(_ context.Context, s state) (state, error) {
				if tries++; tries%2 == 1 {
					return state{}, failed
				}
				return count(s), nil
			}, &graph.NodeOpts{Retry: &graph.RetryPolicy{MaxAttempts: 2}})
			g.AddEdge(graph.START, "flaky")
			g.AddEdge("flaky", graph.END)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			type outcome struct {
				count      int
				log        []string
				status     graph.Status
				interrupts int
				next       []string
				err        string
			}
			var got [2]outcome
			for i, opts := range []*graph.RunOpts{nil, {EventFunc: func(graph.Event) {}}} {
				g := graph.New[state]()
				c.build(g)
				run, err := g.Compile(nil)
				require.NoError(t, err)
				res, err := run.Invoke(context.Background(), "lone", state{}, opts)
				o := outcome{count: res.State.Count.Get(), log: res.State.Log.Items(), status: res.Status,
					interrupts: len(res.Interrupts), next: res.Next}
				if err != nil {
					o.err = err.Error()
					require.ErrorContains(t, err, c.errText)
				} else {
					require.Empty(t, c.errText)
				}
				got[i] = o
				if c.errText == "" {
					// A second run of the same graph goes as the first.
					again, err := run.Invoke(context.Background(), "again", state{}, opts)
					require.NoError(t, err)
					require.Equal(t, res.State.Log.Items(), again.State.Log.Items())
				}
			}
			require.Equal(t, got[1], got[0], "without events as with them")
		})
	}
}
