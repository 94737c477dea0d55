package graph_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/graphtest"
)

// countingSaver counts the payload bytes a saver is asked to store.
type countingSaver struct {
	checkpoint.Saver
	bytes atomic.Int64
}

func (c *countingSaver) Put(ctx context.Context, l checkpoint.Lease, cp checkpoint.Checkpoint) error {
	c.bytes.Add(int64(cp.Size()))
	return c.Saver.Put(ctx, l, cp)
}

func (c *countingSaver) PutWrites(ctx context.Context, l checkpoint.Lease, ws []checkpoint.Write) error {
	for _, w := range ws {
		c.bytes.Add(int64(len(w.Payload)))
	}
	return c.Saver.PutWrites(ctx, l, ws)
}

// BenchmarkTaskloop runs the taskloop workload of graphtest in the shape
// the pipeline uses: tasks in a Keyed collection, one entry written per
// step. Each sub-benchmark reports steps/s over the timed runs (one warm-up
// run first, the input built outside the timer, the final state checked
// after every run), stored_B/step and allocs/step.
func BenchmarkTaskloop(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, sv := range benchSavers(b) {
			b.Run(fmt.Sprintf("T=%d/saver=%s", n, sv.name), func(b *testing.B) {
				tasks := graphtest.Tasks(n)
				benchLoop(b, graphtest.KeyedGraph(), sv, n,
					func() graphtest.KeyedState { return graphtest.KeyedInput(tasks) },
					graphtest.CheckKeyedState)
			})
		}
	}
}

// BenchmarkTaskloopArray runs the taskloop workload exactly as the peers
// model it, without a saver: tasks an array that implement and verify
// replace, completed an array replaced too. bench/peers runs the same graph
// beside langgraphgo, eino and a plain Go loop. (With a saver, this shape
// stores the whole array every step; the keyed shape stores one entry.)
func BenchmarkTaskloopArray(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("T=%d/saver=none", n), func(b *testing.B) {
			tasks := graphtest.Tasks(n)
			benchLoop(b, graphtest.ArrayGraph(), namedSaver{name: "none"}, n,
				func() graphtest.ArrayState { return graphtest.ArrayInput(tasks) },
				graphtest.CheckArrayState)
		})
	}
}

func benchLoop[S any](b *testing.B, g *graph.Graph[S], sv namedSaver, n int, input func() S, check func(int, S) error) {
	var saver *countingSaver
	opts := graph.CompileOpts{StepLimit: 3*n + 10}
	if sv.open != nil {
		saver = &countingSaver{Saver: sv.open(b)}
		opts.Saver = saver
	}
	run, err := g.Compile(&opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	invoke := func(thread string) {
		res, err := run.Invoke(ctx, thread, input(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := check(n, res.State); err != nil {
			b.Fatal(err)
		}
	}
	invoke(fmt.Sprintf("bench-%d-warm", n))
	if saver != nil {
		saver.bytes.Store(0)
	}
	var steps int64
	var elapsed time.Duration
	var allocs uint64
	var ms runtime.MemStats
	for i := 0; b.Loop(); i++ {
		in := input()
		thread := fmt.Sprintf("bench-%d-%d", n, i)
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		start := time.Now()
		res, err := run.Invoke(ctx, thread, in, nil)
		elapsed += time.Since(start)
		runtime.ReadMemStats(&ms)
		allocs += ms.Mallocs - before
		if err != nil {
			b.Fatal(err)
		}
		if err := check(n, res.State); err != nil {
			b.Fatal(err)
		}
		steps += int64(3 * n)
	}
	b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(allocs)/float64(steps), "allocs/step")
	if saver != nil {
		b.ReportMetric(float64(saver.bytes.Load())/float64(steps), "stored_B/step")
	} else {
		b.ReportMetric(0, "stored_B/step")
	}
}

// BenchmarkStepOverhead measures what the runtime itself costs a step:
// three nodes that do next to nothing, in a loop of 300 steps without a
// saver, reported as ns/step.
func BenchmarkStepOverhead(b *testing.B) {
	g := graph.New[state]()
	g.AddNode("a", func(_ context.Context, s state) (state, error) {
		var u state
		u.Count.Set(s.Count.Get() + 1)
		return u, nil
	}, nil)
	g.AddNode("b", noop, nil)
	g.AddNode("c", noop, nil)
	g.AddEdge(graph.START, "a")
	g.AddEdge("a", "b")
	g.AddEdge("b", "c")
	g.AddRouter("c", func(_ context.Context, s state) (string, error) {
		if s.Count.Get() < 100 {
			return "a", nil
		}
		return graph.END, nil
	}, "a", graph.END)
	run, err := g.Compile(&graph.CompileOpts{StepLimit: 400})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := run.Invoke(ctx, "overhead", state{}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*300), "ns/step")
}
