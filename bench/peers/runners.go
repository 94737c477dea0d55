package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/compose"
	lgg "github.com/smallnest/langgraphgo/graph"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/graphtest"
)

// A runner is one runtime compiled for T tasks. prepare builds a run's
// input outside the timer; run executes the prepared run and returns a
// check of its final state, made outside the timer too.
type runner struct {
	name    string
	prepare func() (run func() (check func() error, err error))
}

// state is the workload's state for the peers and the plain loop. As an
// update, a field that is set replaces the state's (Tasks, Current,
// Completed) and Log is appended: the reducers of WORKLOAD.md.
type state struct {
	Tasks     []*graphtest.Task
	Current   string
	Completed []string
	Log       []string
}

func input(tasks []*graphtest.Task) state {
	return state{Tasks: tasks, Completed: []string{}, Log: []string{}}
}

// merge applies the reducers: it folds update u into s.
func merge(s, u state) state {
	if u.Tasks != nil {
		s.Tasks = u.Tasks
	}
	if u.Current != "" {
		s.Current = u.Current
	}
	if u.Completed != nil {
		s.Completed = u.Completed
	}
	s.Log = append(s.Log, u.Log...)
	return s
}

func (s state) check(n int) error {
	return graphtest.CheckArray(n, s.Tasks, s.Completed, s.Log)
}

// The three node bodies and the router, on state: the same graphtest
// functions taskloom's ArrayGraph runs.
func selectNode(_ context.Context, s state) (state, error) {
	id, err := graphtest.SelectReady(s.Tasks)
	return state{Current: id}, err
}

func implementNode(_ context.Context, s state) (state, error) {
	tasks, line, err := graphtest.Implement(s.Tasks, s.Current)
	return state{Tasks: tasks, Log: []string{line}}, err
}

func verifyNode(_ context.Context, s state) (state, error) {
	tasks, err := graphtest.Complete(s.Tasks, s.Current)
	return state{Tasks: tasks, Completed: graphtest.AppendCompleted(s.Completed, s.Current)}, err
}

const (
	nodeSelect    = "select"
	nodeImplement = "implement"
	nodeVerify    = "verify"
)

func runners(n int) ([]runner, error) {
	tasks := graphtest.Tasks(n)
	limit := 3*n + 10
	ctx := context.Background()
	var out []runner

	// taskloom, the peers' exact shape: tasks an array replaced each step.
	arr, err := graphtest.ArrayGraph().Compile(&graph.CompileOpts{StepLimit: limit})
	if err != nil {
		return nil, err
	}
	out = append(out, runner{name: "taskloom (array)", prepare: func() func() (func() error, error) {
		in := graphtest.ArrayInput(tasks)
		return func() (func() error, error) {
			res, err := arr.Invoke(ctx, "bench", in, nil)
			return func() error { return graphtest.CheckArrayState(n, res.State) }, err
		}
	}})

	// taskloom, the pipeline's shape: tasks keyed, one entry written.
	keyed, err := graphtest.KeyedGraph().Compile(&graph.CompileOpts{StepLimit: limit})
	if err != nil {
		return nil, err
	}
	out = append(out, runner{name: "taskloom (keyed)", prepare: func() func() (func() error, error) {
		in := graphtest.KeyedInput(tasks)
		return func() (func() error, error) {
			res, err := keyed.Invoke(ctx, "bench", in, nil)
			return func() error { return graphtest.CheckKeyedState(n, res.State) }, err
		}
	}})

	// langgraphgo: a typed StateGraph whose schema applies the reducers.
	lg := lgg.NewStateGraph[state]()
	lg.AddNode(nodeSelect, "", selectNode)
	lg.AddNode(nodeImplement, "", implementNode)
	lg.AddNode(nodeVerify, "", verifyNode)
	lg.SetEntryPoint(nodeSelect)
	lg.AddEdge(nodeSelect, nodeImplement)
	lg.AddEdge(nodeImplement, nodeVerify)
	lg.AddConditionalEdge(nodeVerify, func(_ context.Context, s state) string {
		if graphtest.AnyPending(s.Tasks) {
			return nodeSelect
		}
		return lgg.END
	})
	lg.SetSchema(lgg.NewStructSchema(state{}, func(s, u state) (state, error) { return merge(s, u), nil }))
	lgRun, err := lg.Compile()
	if err != nil {
		return nil, err
	}
	out = append(out, runner{name: "langgraphgo 0.8.5", prepare: func() func() (func() error, error) {
		in := input(tasks)
		return func() (func() error, error) {
			s, err := lgRun.Invoke(ctx, in)
			return func() error { return s.check(n) }, err
		}
	}})

	// eino: a Pregel graph (cycles need the AnyPredecessor trigger) whose
	// nodes pass the whole state along the edges; each node's update is
	// folded in by the reducers before it is passed on.
	eg := compose.NewGraph[state, state]()
	reduce := func(body func(context.Context, state) (state, error)) *compose.Lambda {
		return compose.InvokableLambda(func(ctx context.Context, s state) (state, error) {
			u, err := body(ctx, s)
			if err != nil {
				return state{}, err
			}
			return merge(s, u), nil
		})
	}
	err = errors.Join(
		eg.AddLambdaNode(nodeSelect, reduce(selectNode)),
		eg.AddLambdaNode(nodeImplement, reduce(implementNode)),
		eg.AddLambdaNode(nodeVerify, reduce(verifyNode)),
		eg.AddEdge(compose.START, nodeSelect),
		eg.AddEdge(nodeSelect, nodeImplement),
		eg.AddEdge(nodeImplement, nodeVerify),
		eg.AddBranch(nodeVerify, compose.NewGraphBranch(func(_ context.Context, s state) (string, error) {
			if graphtest.AnyPending(s.Tasks) {
				return nodeSelect, nil
			}
			return compose.END, nil
		}, map[string]bool{nodeSelect: true, compose.END: true})),
	)
	if err != nil {
		return nil, fmt.Errorf("eino graph: %w", err)
	}
	eRun, err := eg.Compile(ctx, compose.WithMaxRunSteps(limit), compose.WithNodeTriggerMode(compose.AnyPredecessor))
	if err != nil {
		return nil, fmt.Errorf("eino compile: %w", err)
	}
	out = append(out, runner{name: "eino 0.7.36", prepare: func() func() (func() error, error) {
		in := input(tasks)
		return func() (func() error, error) {
			s, err := eRun.Invoke(ctx, in)
			return func() error { return s.check(n) }, err
		}
	}})

	// The floor: the same node bodies and reducers driven by a plain loop.
	out = append(out, runner{name: "plain Go loop", prepare: func() func() (func() error, error) {
		in := input(tasks)
		return func() (func() error, error) {
			s, err := plainLoop(ctx, in, limit)
			return func() error { return s.check(n) }, err
		}
	}})
	return out, nil
}

// plainLoop runs select, implement and verify until no task is pending.
func plainLoop(ctx context.Context, s state, limit int) (state, error) {
	nodes := [...]func(context.Context, state) (state, error){selectNode, implementNode, verifyNode}
	for step := 0; ; step++ {
		if step >= limit {
			return s, errors.New("plain loop: step limit reached")
		}
		u, err := nodes[step%3](ctx, s)
		if err != nil {
			return s, err
		}
		s = merge(s, u)
		if step%3 == 2 && !graphtest.AnyPending(s.Tasks) {
			return s, nil
		}
	}
}
