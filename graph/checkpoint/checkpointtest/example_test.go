package checkpointtest_test

import (
	"fmt"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

// Step makes the checkpoints the suite writes.
func Example() {
	cp := checkpointtest.Step("t1", 3)
	fmt.Println(cp.Step, cp.Source, string(cp.Deltas))
	// Output:
	// 3 loop {"delta":3}
}
