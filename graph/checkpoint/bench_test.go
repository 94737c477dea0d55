package checkpoint_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

// BenchmarkPut measures synchronous Puts of ~300-byte checkpoints, one
// after the other on one thread (so on one connection), and reports them
// as puts/s.
func BenchmarkPut(b *testing.B) {
	savers := map[string]func(testing.TB) checkpoint.Saver{
		"memory":   func(tb testing.TB) checkpoint.Saver { return checkpointtest.NewMemory(tb) },
		"sqlite":   func(tb testing.TB) checkpoint.Saver { return checkpointtest.NewSQLite(tb) },
		"postgres": func(tb testing.TB) checkpoint.Saver { return checkpointtest.NewPostgres(tb) },
		"sqlite_full": func(tb testing.TB) checkpoint.Saver {
			s, err := checkpoint.NewSQLite(tb.Context(), filepath.Join(tb.TempDir(), "full.db"), &checkpoint.SQLiteOpts{Synchronous: "FULL"})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for _, name := range append(checkpointtest.SaverNames, "sqlite_full") {
		b.Run(name, func(b *testing.B) {
			s := savers[name](b)
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
