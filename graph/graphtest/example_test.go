package graphtest_test

import (
	"context"
	"fmt"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/graphtest"
)

// Example runs the taskloop workload over 5 tasks in both shapes and checks
// their final states.
func Example() {
	ctx := context.Background()
	tasks := graphtest.Tasks(5)

	arr, err := graphtest.ArrayGraph().Compile(&graph.CompileOpts{StepLimit: 3*5 + 10})
	if err != nil {
		panic(err)
	}
	a, err := arr.Invoke(ctx, "array", graphtest.ArrayInput(tasks), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("array:", a.Status, a.State.Completed.Get(), graphtest.CheckArrayState(5, a.State))

	keyed, err := graphtest.KeyedGraph().Compile(&graph.CompileOpts{StepLimit: 3*5 + 10})
	if err != nil {
		panic(err)
	}
	k, err := keyed.Invoke(ctx, "keyed", graphtest.KeyedInput(tasks), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("keyed:", k.Status, k.State.Log.Items()[4], graphtest.CheckKeyedState(5, k.State))
	// Output:
	// array: done [t0000 t0001 t0002 t0003 t0004] <nil>
	// keyed: done implement t0004 attempt 1 <nil>
}
