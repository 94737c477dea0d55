package graph_test

import (
	"context"
	"fmt"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
)

// Draft is the state of a small writing loop.
type Draft struct {
	Text     graph.Value[string]  `json:"text"`
	Rounds   graph.Value[int]     `json:"rounds"`
	Log      graph.Append[string] `json:"log"`
	Approved graph.Value[bool]    `json:"approved"`
}

// Example builds a loop with a conditional router and an interrupt that
// asks a human, runs it until it stops for the answer, and resumes it.
func Example() {
	g := graph.New[Draft]()
	g.AddNode("write", func(_ context.Context, s Draft) (Draft, error) {
		var u Draft
		u.Text.Set(s.Text.Get() + "!")
		u.Rounds.Set(s.Rounds.Get() + 1)
		u.Log.Add(fmt.Sprintf("write round %d", s.Rounds.Get()+1))
		return u, nil
	}, nil)
	g.AddNode("review", func(ctx context.Context, s Draft) (Draft, error) {
		ok, err := graph.Interrupt[bool](ctx, "approve "+s.Text.Get()+"?")
		if err != nil {
			return Draft{}, err
		}
		var u Draft
		u.Approved.Set(ok)
		u.Log.Add(fmt.Sprintf("review: approved=%v", ok))
		return u, nil
	}, nil)
	g.AddEdge(graph.START, "write")
	g.AddRouter("write", func(_ context.Context, s Draft) (string, error) {
		if s.Rounds.Get() < 3 {
			return "write", nil
		}
		return "review", nil
	}, "write", "review")
	g.AddEdge("review", graph.END)

	run, err := g.Compile(&graph.CompileOpts{Saver: checkpoint.NewMemory()})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, err := run.Invoke(ctx, "thread-1", Draft{Text: graph.V("hello")}, nil)
	if err != nil {
		panic(err)
	}
	var question string
	_ = res.Interrupts[0].Decode(&question)
	fmt.Println(res.Status, res.Interrupts[0].ID, question)

	res, err = run.Resume(ctx, "thread-1", map[string]any{res.Interrupts[0].ID: true}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.State.Text.Get(), res.State.Approved.Get())
	for _, line := range res.State.Log.Items() {
		fmt.Println(line)
	}
	// Output:
	// interrupted 4/review#0/0 approve hello!!!?
	// done hello!!! true
	// write round 1
	// write round 2
	// write round 3
	// review: approved=true
}
