package store_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/store/sqlite"
	"github.com/taskloom/taskloom/store/storetest"
)

// BenchmarkPut measures synchronous Puts of ~300-byte checkpoints, one
// after the other on one thread (so on one connection), and reports them
// as puts/s.
func BenchmarkPut(b *testing.B) {
	savers := map[string]func(testing.TB) checkpoint.Saver{
		"sqlite_full": func(tb testing.TB) checkpoint.Saver {
			s, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "full.db"), &sqlite.Opts{Synchronous: "FULL"})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for _, name := range append(storetest.DriverNames, "sqlite_full") {
		b.Run(name, func(b *testing.B) {
			var s checkpoint.Saver
			if open, ok := savers[name]; ok {
				s = open(b)
			} else {
				s = storetest.New(b, name)
			}
			ctx := b.Context()
			lease, err := s.Acquire(ctx, "bench", "bench", checkpointtest.T0, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			cp := checkpoint.Checkpoint{
				Source:  "loop",
				Writers: []string{"implement_task"},
				Deltas:  bytes.Repeat([]byte("d"), 200),
				Next:    bytes.Repeat([]byte("n"), 50),
				Meta:    []byte(`{"node":"implement_task","attempt":1}`),
			}
			b.SetBytes(int64(cp.Size()))
			var step int64
			for b.Loop() {
				cp.Step = step
				cp.CreatedAt = checkpointtest.T0.Add(time.Duration(step) * time.Millisecond)
				if err := s.Put(ctx, lease, cp); err != nil {
					b.Fatal(err)
				}
				step++
			}
			b.ReportMetric(float64(step)/b.Elapsed().Seconds(), "puts/s")
		})
	}
}
