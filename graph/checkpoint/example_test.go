package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// A process takes a thread's lease, writes checkpoints with it and loads
// them back; a second process finds the thread busy.
func Example() {
	ctx := context.Background()
	s := checkpoint.NewMemory()
	defer func() { _ = s.Close() }()

	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	lease, err := s.Acquire(ctx, "run-1", "pid 42 on host-a", now, time.Minute)
	if err != nil {
		panic(err)
	}
	for step := range int64(3) {
		cp := checkpoint.Checkpoint{
			Step:      step,
			Source:    "loop",
			Deltas:    fmt.Appendf(nil, `{"done":[%d]}`, step),
			CreatedAt: now.Add(time.Duration(step) * time.Second),
		}
		if step == 0 {
			cp.Snapshot = []byte(`{"done":[0]}`)
		}
		if err := s.Put(ctx, lease, cp); err != nil {
			panic(err)
		}
	}

	_, err = s.Acquire(ctx, "run-1", "pid 7 on host-b", now, time.Minute)
	fmt.Println(err, errors.Is(err, checkpoint.ErrThreadBusy))

	ld, err := s.Load(ctx, "run-1", -1)
	if err != nil {
		panic(err)
	}
	fmt.Println("head", ld.Head, "chain", len(ld.Chain), string(ld.Chain[0].Snapshot))
	// Output:
	// thread run-1 is being driven by another process (pid 42 on host-a) true
	// head 2 chain 3 {"done":[0]}
}

func ExampleMaskURL() {
	fmt.Println(checkpoint.MaskURL("postgres://taskloom:s3cret@db:5432/taskloom?sslmode=disable"))
	// Output: postgres://taskloom:xxxxx@db:5432/taskloom?sslmode=disable
}
