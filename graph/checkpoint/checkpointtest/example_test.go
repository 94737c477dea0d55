package checkpointtest_test

import (
	"fmt"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

// ForEachSaver names its subtests after SaverNames; Step makes the
// checkpoints the suite writes.
func Example() {
	fmt.Println(checkpointtest.SaverNames)
	cp := checkpointtest.Step("t1", 3)
	fmt.Println(cp.Step, cp.Source, string(cp.Deltas))
	// Output:
	// [memory sqlite postgres]
	// 3 loop {"delta":3}
}
