package graph_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
)

// The taskloop workload of shared/bench/WORKLOAD.md, with tasks as a keyed
// collection and completed as an append field (the node still writes the
// completed list's new id only).
type loopTask struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Status   string   `json:"status"`
	Attempts int      `json:"attempts"`
	Files    []string `json:"files"`
	Deps     []string `json:"deps"`
}

type loopState struct {
	Tasks     graph.Keyed[loopTask] `json:"tasks"`
	Current   graph.Value[string]   `json:"current"`
	Completed graph.Append[string]  `json:"completed"`
	Log       graph.Append[string]  `json:"log"`
}

func loopInput(n int) loopState {
	var s loopState
	for i := range n {
		t := loopTask{
			ID:     fmt.Sprintf("t%04d", i),
			Title:  fmt.Sprintf("Implement step %04d of the taskloop benchmark workload", i),
			Status: "pending",
			Files:  []string{fmt.Sprintf("src/mod%02d/a.go", i%50), fmt.Sprintf("src/mod%02d/b.go", i%50), fmt.Sprintf("test/t%04d_test.go", i)},
			Deps:   []string{},
		}
		t.Title += strings.Repeat(".", 60-len(t.Title))
		if i >= 1 {
			t.Deps = append(t.Deps, fmt.Sprintf("t%04d", i-1))
		}
		if i >= 3 {
			t.Deps = append(t.Deps, fmt.Sprintf("t%04d", i-3))
		}
		s.Tasks.Put(t.ID, t)
	}
	return s
}

func loopGraph(t testing.TB) *graph.Graph[loopState] {
	g := graph.New[loopState]()
	g.AddNode("select", func(_ context.Context, s loopState) (loopState, error) {
		var u loopState
		for _, id := range s.Tasks.Keys() {
			t, _ := s.Tasks.Get(id)
			if t.Status != "pending" {
				continue
			}
			ready := true
			for _, d := range t.Deps {
				if dt, ok := s.Tasks.Get(d); !ok || dt.Status != "completed" {
					ready = false
					break
				}
			}
			if ready {
				u.Current.Set(id)
				return u, nil
			}
		}
		return u, fmt.Errorf("no task ready")
	}, nil)
	g.AddNode("implement", func(_ context.Context, s loopState) (loopState, error) {
		var u loopState
		id := s.Current.Get()
		t, _ := s.Tasks.Get(id)
		t.Status = "in_progress"
		t.Attempts++
		u.Tasks.Put(id, t)
		u.Log.Add(fmt.Sprintf("implement %s attempt %d", id, t.Attempts))
		return u, nil
	}, nil)
	g.AddNode("verify", func(_ context.Context, s loopState) (loopState, error) {
		var u loopState
		id := s.Current.Get()
		t, _ := s.Tasks.Get(id)
		t.Status = "completed"
		u.Tasks.Put(id, t)
		u.Completed.Add(id)
		return u, nil
	}, nil)
	g.AddEdge(graph.START, "select")
	g.AddEdge("select", "implement")
	g.AddEdge("implement", "verify")
	g.AddRouter("verify", func(_ context.Context, s loopState) (string, error) {
		for _, id := range s.Tasks.Keys() {
			if t, _ := s.Tasks.Get(id); t.Status == "pending" {
				return "select", nil
			}
		}
		return graph.END, nil
	}, "select", graph.END)
	return g
}

func checkLoop(tb testing.TB, s loopState, n int) {
	tb.Helper()
	if s.Completed.Len() != n || s.Log.Len() != n {
		tb.Fatalf("completed %d, log %d, want %d", s.Completed.Len(), s.Log.Len(), n)
	}
	for i, id := range s.Completed.Items() {
		if want := fmt.Sprintf("t%04d", i); id != want {
			tb.Fatalf("completed[%d] = %s, want %s", i, id, want)
		}
		if t, _ := s.Tasks.Get(id); t.Status != "completed" || t.Attempts != 1 {
			tb.Fatalf("task %s: status %s attempts %d", id, t.Status, t.Attempts)
		}
	}
}

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

func BenchmarkTaskloop(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, sv := range benchSavers(b) {
			b.Run(fmt.Sprintf("T=%d/saver=%s", n, sv.name), func(b *testing.B) {
				input := loopInput(n)
				var saver *countingSaver
				var opts graph.CompileOpts
				opts.StepLimit = 3*n + 10
				if sv.open != nil {
					saver = &countingSaver{Saver: sv.open(b)}
					opts.Saver = saver
				}
				run, err := loopGraph(b).Compile(&opts)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				var steps int64
				var elapsed time.Duration
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					// Each run gets a fresh copy of the input state.
					in := loopInput(0)
					for _, id := range input.Tasks.Keys() {
						t, _ := input.Tasks.Get(id)
						in.Tasks.Put(id, t)
					}
					res, err := run.Invoke(ctx, fmt.Sprintf("bench-%d-%d", n, i), in, nil)
					elapsed += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					checkLoop(b, res.State, n)
					steps += int64(3 * n)
				}
				b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
				if saver != nil {
					b.ReportMetric(float64(saver.bytes.Load())/float64(steps), "stored_B/step")
				} else {
					b.ReportMetric(0, "stored_B/step")
				}
			})
		}
	}
}
