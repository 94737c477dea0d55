package checkpointtest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// T0 is the time the suite's clocks start at. Savers keep times to the
// microsecond, so the suite's times are whole microseconds.
var T0 = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)

// Run runs the saver conformance suite, one parallel subtest per behaviour,
// each on a new saver from newSaver.
func Run(t *testing.T, newSaver NewSaverFunc) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s checkpoint.Saver)
	}{
		{"PutLoadList", testPutLoadList},
		{"RoundTripBytes", testRoundTripBytes},
		{"NoAliasing", testNoAliasing},
		{"LoadChainFromSnapshot", testLoadChainFromSnapshot},
		{"PendingWrites", testPendingWrites},
		{"LeaseBusy", testLeaseBusy},
		{"TakeoverExpired", testTakeoverExpired},
		{"PutCAS", testPutCAS},
		{"FailedWriteStoresNothing", testFailedWriteStoresNothing},
		{"ConcurrentPut", testConcurrentPut},
		{"ConcurrentAcquire", testConcurrentAcquire},
		{"ConcurrentThreads", testConcurrentThreads},
		{"Prune", testPrune},
		{"Threads", testThreads},
		{"StoreClock", testStoreClock},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newSaver(t))
		})
	}
}

// Step returns the checkpoint the suite writes at step: every payload is
// set and names the step.
func Step(threadID string, step int64) checkpoint.Checkpoint {
	return checkpoint.Checkpoint{
		ThreadID:  threadID,
		Step:      step,
		Source:    "loop",
		Writers:   []string{fmt.Sprintf("node%d", step), "other"},
		Deltas:    fmt.Appendf(nil, `{"delta":%d}`, step),
		Next:      fmt.Appendf(nil, `["task%d"]`, step+1),
		Meta:      fmt.Appendf(nil, `{"step":%d}`, step),
		CreatedAt: T0.Add(time.Duration(step) * time.Second),
	}
}

// normalize makes checkpoints comparable with require.Equal: times in UTC.
func normalize(cps []checkpoint.Checkpoint) []checkpoint.Checkpoint {
	out := make([]checkpoint.Checkpoint, len(cps))
	for i, c := range cps {
		c.CreatedAt = c.CreatedAt.UTC()
		out[i] = c
	}
	return out
}

func steps(cps []checkpoint.Checkpoint) []int64 {
	out := make([]int64, len(cps))
	for i, c := range cps {
		out[i] = c.Step
	}
	return out
}

func acquire(t *testing.T, s checkpoint.Saver, threadID, holder string, now time.Time) checkpoint.Lease {
	t.Helper()
	l, err := s.Acquire(t.Context(), threadID, holder, now, time.Minute)
	require.NoError(t, err)
	return l
}

// putSteps puts the checkpoints from..to (inclusive) made by Step, with a
// snapshot on each step in snaps.
func putSteps(t *testing.T, s checkpoint.Saver, l checkpoint.Lease, from, to int64, snaps ...int64) []checkpoint.Checkpoint {
	t.Helper()
	var out []checkpoint.Checkpoint
	for i := from; i <= to; i++ {
		cp := Step(l.ThreadID, i)
		for _, sn := range snaps {
			if sn == i {
				cp.Snapshot = fmt.Appendf(nil, `{"snapshot":%d}`, i)
			}
		}
		require.NoError(t, s.Put(t.Context(), l, cp), "put step %d", i)
		out = append(out, cp)
	}
	return out
}

func load(t *testing.T, s checkpoint.Saver, threadID string, step int64) checkpoint.Loaded {
	t.Helper()
	ld, err := s.Load(t.Context(), threadID, step)
	require.NoError(t, err, "load %s at %d", threadID, step)
	return ld
}

func testPutLoadList(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	_, err := s.Load(ctx, "t1", -1)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = s.List(ctx, "t1", 0)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

	l := acquire(t, s, "t1", "a", T0)
	require.Equal(t, "t1", l.ThreadID)
	require.Equal(t, "a", l.Holder)
	require.Positive(t, l.Token)
	require.True(t, l.Expires.Equal(T0.Add(time.Minute)), "lease expires %v, want %v", l.Expires, T0.Add(time.Minute))

	// A thread without checkpoints exists but has nothing to load.
	_, err = s.Load(ctx, "t1", -1)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	got, err := s.List(ctx, "t1", 0)
	require.NoError(t, err)
	require.Empty(t, got)

	// The saver fills ThreadID in from the lease.
	cp0 := Step("", 0)
	require.NoError(t, s.Put(ctx, l, cp0))
	want := append([]checkpoint.Checkpoint{Step("t1", 0)}, putSteps(t, s, l, 1, 4)...)

	ld := load(t, s, "t1", -1)
	require.Equal(t, int64(4), ld.Head)
	require.Equal(t, want, normalize(ld.Chain))
	require.Empty(t, ld.Writes)

	ld = load(t, s, "t1", 2)
	require.Equal(t, int64(4), ld.Head)
	require.Equal(t, want[:3], normalize(ld.Chain))

	for _, step := range []int64{5, 100} {
		_, err = s.Load(ctx, "t1", step)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, "load step %d past the head", step)
	}
	_, err = s.Load(ctx, "nope", 0)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

	list, err := s.List(ctx, "t1", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 3, 2, 1, 0}, steps(list))
	for i, c := range normalize(list) {
		w := want[4-i]
		w.Deltas, w.Snapshot, w.Next = nil, nil, nil
		require.Equal(t, w, c, "list entry %d", i)
	}
	list, err = s.List(ctx, "t1", 2)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 3}, steps(list))
	list, err = s.List(ctx, "t1", 10)
	require.NoError(t, err)
	require.Len(t, list, 5)
}

func testRoundTripBytes(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	l := acquire(t, s, "bytes", "a", T0)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	cps := []checkpoint.Checkpoint{
		{ThreadID: "bytes", Step: 0, Source: "input", CreatedAt: T0},
		{ThreadID: "bytes", Step: 1, Source: "loop", Writers: []string{}, Deltas: []byte{0, 1, 0xff, 0}, Next: []byte{}, Meta: []byte(`{}`), CreatedAt: T0.Add(time.Microsecond)},
		{ThreadID: "bytes", Step: 2, Source: "update", Writers: []string{"a b", `q"uote`, "ünï"}, Deltas: big, Next: []byte("[]"), CreatedAt: T0.Add(time.Hour)},
	}
	for _, cp := range cps {
		require.NoError(t, s.Put(ctx, l, cp))
	}
	ld := load(t, s, "bytes", -1)
	require.Len(t, ld.Chain, 3)
	for i, c := range normalize(ld.Chain) {
		require.Equal(t, cps[i].Source, c.Source, "step %d", i)
		require.Equal(t, cps[i].Writers, c.Writers, "step %d: writers", i)
		require.True(t, bytes.Equal(cps[i].Deltas, c.Deltas), "step %d: deltas differ", i)
		require.Equal(t, cps[i].Deltas == nil, c.Deltas == nil, "step %d: nil deltas must stay nil, empty ones empty", i)
		require.Equal(t, cps[i].Next, c.Next, "step %d: next", i)
		require.Equal(t, cps[i].Meta, c.Meta, "step %d: meta", i)
		require.Nil(t, c.Snapshot, "step %d: snapshot", i)
		require.True(t, cps[i].CreatedAt.Equal(c.CreatedAt), "step %d: created at %v, want %v", i, c.CreatedAt, cps[i].CreatedAt)
	}

	// An empty snapshot is still a snapshot: the chain starts there.
	cp := Step("bytes", 3)
	cp.Snapshot = []byte{}
	require.NoError(t, s.Put(ctx, l, cp))
	putSteps(t, s, l, 4, 4)
	ld = load(t, s, "bytes", -1)
	require.Equal(t, []int64{3, 4}, steps(ld.Chain))
	require.NotNil(t, ld.Chain[0].Snapshot)
	require.Empty(t, ld.Chain[0].Snapshot)
}

func testNoAliasing(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	l := acquire(t, s, "alias", "a", T0)
	cp := Step("alias", 0)
	cp.Snapshot = []byte("snap")
	want := Step("alias", 0)
	want.Snapshot = []byte("snap")
	require.NoError(t, s.Put(ctx, l, cp))
	// The caller's slices are its own after Put...
	cp.Deltas[0], cp.Snapshot[0], cp.Next[0], cp.Meta[0], cp.Writers[0] = 'X', 'X', 'X', 'X', "X"
	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{write(1, "t", checkpoint.WriteUpdate, "p")}))
	// ...and after Load and List.
	ld := load(t, s, "alias", -1)
	c := ld.Chain[0]
	c.Deltas[0], c.Snapshot[0], c.Next[0], c.Meta[0], c.Writers[0] = 'Y', 'Y', 'Y', 'Y', "Y"
	ld.Writes[0].Payload[0] = 'Y'
	list, err := s.List(ctx, "alias", 0)
	require.NoError(t, err)
	list[0].Meta[0], list[0].Writers[0] = 'Z', "Z"

	ld = load(t, s, "alias", -1)
	require.Equal(t, []checkpoint.Checkpoint{want}, normalize(ld.Chain))
	require.Equal(t, []string{"1/t/update=p"}, payloads(ld.Writes))
}

func testLoadChainFromSnapshot(t *testing.T, s checkpoint.Saver) {
	l := acquire(t, s, "snap", "a", T0)
	all := putSteps(t, s, l, 0, 9, 0, 4, 7)
	for _, tc := range []struct {
		step int64
		want []int64
	}{
		{-1, []int64{7, 8, 9}},
		{9, []int64{7, 8, 9}},
		{7, []int64{7}},
		{6, []int64{4, 5, 6}},
		{4, []int64{4}},
		{3, []int64{0, 1, 2, 3}},
		{0, []int64{0}},
	} {
		ld := load(t, s, "snap", tc.step)
		require.Equal(t, tc.want, steps(ld.Chain), "load step %d", tc.step)
		require.Equal(t, all[tc.want[0]:tc.want[len(tc.want)-1]+1], normalize(ld.Chain), "load step %d", tc.step)
		require.Equal(t, int64(9), ld.Head)
	}

	// Without a snapshot at or before the target, the chain starts at the
	// first checkpoint.
	l2 := acquire(t, s, "late-snap", "a", T0)
	putSteps(t, s, l2, 0, 3, 2)
	require.Equal(t, []int64{0, 1}, steps(load(t, s, "late-snap", 1).Chain))
	require.Equal(t, []int64{2, 3}, steps(load(t, s, "late-snap", 3).Chain))
}

func write(step int64, task string, kind checkpoint.WriteKind, payload string) checkpoint.Write {
	return checkpoint.Write{Step: step, TaskID: task, Kind: kind, Payload: []byte(payload)}
}

func payloads(ws []checkpoint.Write) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = fmt.Sprintf("%d/%s/%s=%s", w.Step, w.TaskID, w.Kind, w.Payload)
	}
	return out
}

func testPendingWrites(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	l := acquire(t, s, "pw", "a", T0)
	putSteps(t, s, l, 0, 1)

	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{
		write(2, "a#1", checkpoint.WriteUpdate, "a1"),
		write(2, "b#1", checkpoint.WriteUpdate, "b1"),
		write(2, "a#1", checkpoint.WriteInterrupt, "ai"),
	}))
	ld := load(t, s, "pw", -1)
	require.Equal(t, []string{"2/a#1/update=a1", "2/b#1/update=b1", "2/a#1/interrupt=ai"}, payloads(ld.Writes))
	for _, w := range ld.Writes {
		require.Equal(t, "pw", w.ThreadID)
	}

	// An upsert replaces the payload and moves the write to the end; of
	// several writes with one key in a batch, the last wins.
	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{write(2, "a#1", checkpoint.WriteUpdate, "a2")}))
	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{
		write(2, "c#1", checkpoint.WriteUpdate, "c1"),
		write(2, "int-1", checkpoint.WriteResume, "yes"),
		write(2, "c#1", checkpoint.WriteUpdate, "c2"),
	}))
	// Writes for a later step are kept but not yet returned.
	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{write(3, "later", checkpoint.WriteUpdate, "l")}))
	// An empty batch is fine.
	require.NoError(t, s.PutWrites(ctx, l, nil))
	want := []string{"2/b#1/update=b1", "2/a#1/interrupt=ai", "2/a#1/update=a2", "2/int-1/resume=yes", "2/c#1/update=c2"}
	require.Equal(t, want, payloads(load(t, s, "pw", -1).Writes))
	require.Equal(t, want, payloads(load(t, s, "pw", 1).Writes), "load at the head by number")

	// Only a load of the head returns pending writes.
	require.Empty(t, load(t, s, "pw", 0).Writes)

	// The next Put settles the step's writes.
	putSteps(t, s, l, 2, 2)
	require.Equal(t, []string{"3/later/update=l"}, payloads(load(t, s, "pw", -1).Writes))
	// A write for a step already written is never returned.
	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{write(2, "stale", checkpoint.WriteUpdate, "s")}))
	require.Equal(t, []string{"3/later/update=l"}, payloads(load(t, s, "pw", -1).Writes))
	putSteps(t, s, l, 3, 3)
	require.Empty(t, load(t, s, "pw", -1).Writes)
	require.Empty(t, load(t, s, "pw", 2).Writes)
}

func testLeaseBusy(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	a := acquire(t, s, "busy", "proc-a (pid 1, host x)", T0)

	_, err := s.Acquire(ctx, "busy", "proc-b", T0.Add(30*time.Second), time.Minute)
	require.ErrorIs(t, err, checkpoint.ErrThreadBusy)
	var be *checkpoint.BusyError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "busy", be.ThreadID)
	require.Equal(t, "proc-a (pid 1, host x)", be.Holder)
	require.True(t, be.Expires.Equal(T0.Add(time.Minute)), "busy until %v, want %v", be.Expires, T0.Add(time.Minute))
	require.Contains(t, err.Error(), "proc-a (pid 1, host x)")

	// The holder renews its live lease: same token, later expiry.
	a2 := acquire(t, s, "busy", "proc-a (pid 1, host x)", T0.Add(30*time.Second))
	require.Equal(t, a.Token, a2.Token)
	require.True(t, a2.Expires.Equal(T0.Add(90*time.Second)))
	_, err = s.Acquire(ctx, "busy", "proc-b", T0.Add(70*time.Second), time.Minute)
	require.ErrorIs(t, err, checkpoint.ErrThreadBusy, "the renewed lease is still live")

	require.NoError(t, s.Release(ctx, a2))
	require.NoError(t, s.Release(ctx, a2), "releasing a lost lease is not an error")
	b := acquire(t, s, "busy", "proc-b", T0.Add(70*time.Second))
	require.Greater(t, b.Token, a2.Token)

	// The released lease can write nothing any more.
	require.ErrorIs(t, s.Put(ctx, a2, Step("busy", 0)), checkpoint.ErrLeaseLost)
	require.ErrorIs(t, s.PutWrites(ctx, a2, []checkpoint.Write{write(0, "x", checkpoint.WriteUpdate, "x")}), checkpoint.ErrLeaseLost)
	cp := Step("busy", 0)
	cp.CreatedAt = T0.Add(70 * time.Second) // renews b's lease until T0+130s
	require.NoError(t, s.Put(ctx, b, cp))
	require.ErrorIs(t, s.Prune(ctx, a2, 0, nil), checkpoint.ErrLeaseLost)
	// Releasing the old lease does not release the new one.
	require.NoError(t, s.Release(ctx, a2))
	_, err = s.Acquire(ctx, "busy", "proc-c", T0.Add(71*time.Second), time.Minute)
	require.ErrorAs(t, err, &be)
	require.Equal(t, "proc-b", be.Holder)

	// Taking the thread again after a release is a new acquisition.
	require.NoError(t, s.Release(ctx, b))
	b2 := acquire(t, s, "busy", "proc-b", T0.Add(72*time.Second))
	require.Greater(t, b2.Token, b.Token)
	require.ErrorIs(t, s.Put(ctx, b, Step("busy", 1)), checkpoint.ErrLeaseLost)
	require.NoError(t, s.Put(ctx, b2, Step("busy", 1)))
}

func testTakeoverExpired(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	a := acquire(t, s, "take", "a", T0)
	// Put renews the lease until the checkpoint's time + ttl.
	cp := Step("take", 0)
	cp.CreatedAt = T0.Add(10 * time.Second)
	require.NoError(t, s.Put(ctx, a, cp))
	require.NoError(t, s.PutWrites(ctx, a, []checkpoint.Write{write(1, "t", checkpoint.WriteUpdate, "from a")}))
	_, err := s.Acquire(ctx, "take", "b", T0.Add(65*time.Second), time.Minute)
	require.ErrorIs(t, err, checkpoint.ErrThreadBusy, "Put must renew the lease")

	// At its expiry the lease is taken over, with a greater token.
	b := acquire(t, s, "take", "b", T0.Add(70*time.Second))
	require.Greater(t, b.Token, a.Token)

	// The old holder is fenced off: none of its writes land.
	require.ErrorIs(t, s.Put(ctx, a, Step("take", 1)), checkpoint.ErrLeaseLost)
	require.ErrorIs(t, s.PutWrites(ctx, a, []checkpoint.Write{write(1, "t", checkpoint.WriteUpdate, "late a")}), checkpoint.ErrLeaseLost)
	require.ErrorIs(t, s.Prune(ctx, a, 0, []byte("{}")), checkpoint.ErrLeaseLost)
	_, err = s.Acquire(ctx, "take", "a", T0.Add(71*time.Second), time.Minute)
	require.ErrorIs(t, err, checkpoint.ErrThreadBusy)

	ld := load(t, s, "take", -1)
	require.Equal(t, int64(0), ld.Head)
	require.Equal(t, []string{"1/t/update=from a"}, payloads(ld.Writes), "writes made under the old lease while it was live stay")
	require.NoError(t, s.Put(ctx, b, Step("take", 1)))
	require.Equal(t, int64(1), load(t, s, "take", -1).Head)

	// The same holder coming back after its own lease expired gets a new
	// token too.
	b2 := acquire(t, s, "take", "b", T0.Add(time.Hour))
	require.Greater(t, b2.Token, b.Token)
	require.ErrorIs(t, s.Put(ctx, b, Step("take", 2)), checkpoint.ErrLeaseLost)
	require.NoError(t, s.Put(ctx, b2, Step("take", 2)))
}

func testPutCAS(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	l := acquire(t, s, "cas", "a", T0)
	require.ErrorIs(t, s.Put(ctx, l, Step("cas", 1)), checkpoint.ErrConflict, "a new thread starts at step 0")
	require.NoError(t, s.Put(ctx, l, Step("cas", 0)))
	require.ErrorIs(t, s.Put(ctx, l, Step("cas", 0)), checkpoint.ErrConflict)
	require.ErrorIs(t, s.Put(ctx, l, Step("cas", 2)), checkpoint.ErrConflict)
	require.ErrorIs(t, s.Put(ctx, l, Step("cas", -1)), checkpoint.ErrConflict)
	require.NoError(t, s.Put(ctx, l, Step("cas", 1)))

	ld := load(t, s, "cas", -1)
	require.Equal(t, int64(1), ld.Head)
	require.Equal(t, []checkpoint.Checkpoint{Step("cas", 0), Step("cas", 1)}, normalize(ld.Chain), "failed Puts stored nothing")

	// A lost lease is reported before a conflict.
	require.NoError(t, s.Release(ctx, l))
	require.ErrorIs(t, s.Put(ctx, l, Step("cas", 5)), checkpoint.ErrLeaseLost)
	// A lease the saver never gave is not current.
	fake := checkpoint.Lease{ThreadID: "never", Holder: "a", Token: 1, Expires: T0.Add(time.Hour)}
	require.ErrorIs(t, s.Put(ctx, fake, Step("never", 0)), checkpoint.ErrLeaseLost)
	require.ErrorIs(t, s.PutWrites(ctx, fake, nil), checkpoint.ErrLeaseLost)
}

func testFailedWriteStoresNothing(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	a := acquire(t, s, "crash", "a", T0)
	putSteps(t, s, a, 0, 2)
	// The process records a task's result, then "dies" before the step's
	// checkpoint: its lease expires and b takes over. a's late Put stores
	// nothing.
	require.NoError(t, s.PutWrites(ctx, a, []checkpoint.Write{write(3, "impl#1", checkpoint.WriteUpdate, "done")}))
	b := acquire(t, s, "crash", "b", T0.Add(time.Hour))
	require.ErrorIs(t, s.Put(ctx, a, Step("crash", 3)), checkpoint.ErrLeaseLost)
	ld := load(t, s, "crash", -1)
	require.Equal(t, int64(2), ld.Head)
	require.Equal(t, []int64{0, 1, 2}, steps(ld.Chain))
	require.Equal(t, []string{"3/impl#1/update=done"}, payloads(ld.Writes))
	list, err := s.List(ctx, "crash", 0)
	require.NoError(t, err)
	require.Len(t, list, 3)

	// A Put whose context is cancelled either fails and stores nothing or
	// succeeds whole: it never leaves half a step.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	cp := Step("crash", 3)
	err = s.Put(cctx, b, cp)
	ld = load(t, s, "crash", -1)
	list, lerr := s.List(ctx, "crash", 0)
	require.NoError(t, lerr)
	if err != nil {
		require.Equal(t, int64(2), ld.Head, "a failed Put moved the head")
		require.Len(t, list, 3)
		require.Len(t, ld.Writes, 1)
		require.NoError(t, s.Put(ctx, b, cp), "the step can be written after a failed attempt")
	} else {
		require.Equal(t, int64(3), ld.Head)
		require.Len(t, list, 4)
		require.Equal(t, cp, normalize(ld.Chain)[len(ld.Chain)-1])
	}
	require.Equal(t, int64(3), load(t, s, "crash", -1).Head)
}

func testConcurrentPut(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	l := acquire(t, s, "race", "a", T0)
	putSteps(t, s, l, 0, 0)
	const n = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cp := Step("race", 1)
			cp.Deltas = fmt.Appendf(nil, "writer %d", i)
			<-start
			errs[i] = s.Put(ctx, l, cp)
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two Puts of step 1 succeeded: %d and %d", winner, i)
			winner = i
			continue
		}
		require.ErrorIs(t, err, checkpoint.ErrConflict, "writer %d", i)
	}
	require.NotEqual(t, -1, winner, "no Put succeeded")
	ld := load(t, s, "race", -1)
	require.Equal(t, int64(1), ld.Head)
	require.Equal(t, fmt.Sprintf("writer %d", winner), string(ld.Chain[len(ld.Chain)-1].Deltas))
	list, err := s.List(ctx, "race", 0)
	require.NoError(t, err)
	require.Len(t, list, 2)
}

func testConcurrentAcquire(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	const n = 8
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		leases = make([]checkpoint.Lease, n)
		errs   = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			leases[i], errs[i] = s.Acquire(ctx, "contended", fmt.Sprintf("holder-%d", i), T0, time.Minute)
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two holders got the lease: %d and %d", winner, i)
			winner = i
		}
	}
	require.NotEqual(t, -1, winner, "nobody got the lease")
	for i, err := range errs {
		if i == winner {
			continue
		}
		var be *checkpoint.BusyError
		require.ErrorAs(t, err, &be, "holder %d", i)
		require.Equal(t, fmt.Sprintf("holder-%d", winner), be.Holder)
	}
	require.NoError(t, s.Put(ctx, leases[winner], Step("contended", 0)))
}

func testConcurrentThreads(t *testing.T, s checkpoint.Saver) {
	const threads, stepsPer = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	for i := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("par-%d", i)
			l, err := s.Acquire(t.Context(), id, "a", T0, time.Minute)
			if err != nil {
				errs <- err
				return
			}
			for step := range int64(stepsPer) {
				if err := s.PutWrites(t.Context(), l, []checkpoint.Write{write(step, "t", checkpoint.WriteUpdate, id)}); err != nil {
					errs <- fmt.Errorf("%s: put writes %d: %w", id, step, err)
					return
				}
				if err := s.Put(t.Context(), l, Step(id, step)); err != nil {
					errs <- fmt.Errorf("%s: put %d: %w", id, step, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for i := range threads {
		id := fmt.Sprintf("par-%d", i)
		ld := load(t, s, id, -1)
		require.Equal(t, int64(stepsPer-1), ld.Head, id)
		require.Len(t, ld.Chain, stepsPer, id)
		require.Empty(t, ld.Writes, id)
	}
}

func testPrune(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	l := acquire(t, s, "prune", "a", T0)
	all := putSteps(t, s, l, 0, 9, 0)
	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{write(10, "t", checkpoint.WriteUpdate, "pending")}))
	other := acquire(t, s, "other", "a", T0)
	putSteps(t, s, other, 0, 3)

	snap := []byte(`{"state at":5}`)
	require.NoError(t, s.Prune(ctx, l, 5, snap))

	ld := load(t, s, "prune", -1)
	require.Equal(t, int64(9), ld.Head)
	require.Equal(t, []int64{5, 6, 7, 8, 9}, steps(ld.Chain))
	require.Equal(t, snap, ld.Chain[0].Snapshot)
	require.Equal(t, all[6:], normalize(ld.Chain[1:]))
	require.Equal(t, []string{"10/t/update=pending"}, payloads(ld.Writes), "pending writes of the next step survive a prune")
	require.Equal(t, []int64{5, 6, 7}, steps(load(t, s, "prune", 7).Chain))
	for _, step := range []int64{0, 4} {
		_, err := s.Load(ctx, "prune", step)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, "load pruned step %d", step)
	}
	list, err := s.List(ctx, "prune", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{9, 8, 7, 6, 5}, steps(list))
	require.Equal(t, []int64{0, 1, 2, 3}, steps(load(t, s, "other", -1).Chain), "prune touched another thread")

	require.ErrorIs(t, s.Prune(ctx, l, 2, snap), checkpoint.ErrNotFound, "prune from a pruned step")
	require.ErrorIs(t, s.Prune(ctx, l, 42, snap), checkpoint.ErrNotFound, "prune from a step past the head")

	// The thread goes on after a prune.
	putSteps(t, s, l, 10, 10)
	require.Equal(t, []int64{5, 6, 7, 8, 9, 10}, steps(load(t, s, "prune", -1).Chain))
	snap10 := []byte(`{"state at":10}`)
	require.NoError(t, s.Prune(ctx, l, 10, snap10))
	ld = load(t, s, "prune", -1)
	require.Equal(t, []int64{10}, steps(ld.Chain))
	require.Equal(t, snap10, ld.Chain[0].Snapshot)
}

func testThreads(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	got, err := s.Threads(ctx)
	require.NoError(t, err)
	require.Empty(t, got)

	la := acquire(t, s, "a", "h1", T0)
	acquire(t, s, "d", "h4", T0)
	lb := acquire(t, s, "b", "h2", T0.Add(time.Second))
	cp := Step("b", 0)
	cp.CreatedAt = T0.Add(5 * time.Second)
	require.NoError(t, s.Put(ctx, lb, cp))
	lc := acquire(t, s, "c", "h3", T0.Add(2*time.Second))
	require.NoError(t, s.Release(ctx, lc))

	got, err = s.Threads(ctx)
	require.NoError(t, err)
	type row struct {
		ID, Holder       string
		Head             int64
		Created, Updated time.Time
	}
	rows := make([]row, len(got))
	for i, g := range got {
		rows[i] = row{g.ThreadID, g.Holder, g.Head, g.CreatedAt.UTC(), g.UpdatedAt.UTC()}
	}
	require.Equal(t, []row{
		{"b", "h2", 0, T0.Add(time.Second), T0.Add(5 * time.Second)},
		{"c", "", -1, T0.Add(2 * time.Second), T0.Add(2 * time.Second)},
		{"a", "h1", -1, T0, T0},
		{"d", "h4", -1, T0, T0},
	}, rows, "newest updated first, then by ID")
	// A held lease says until when; a released one, nothing.
	require.True(t, got[2].Expires.Equal(la.Expires), "a's lease expires %v, want %v", got[2].Expires, la.Expires)
	require.False(t, got[0].Expires.Before(lb.Expires), "b's lease, renewed by Put, expires %v", got[0].Expires)
	require.True(t, got[1].Expires.IsZero(), "c's lease was released")
}

// testStoreClock: a zero now takes the lease on the store's clock (the
// expiry is the store's now plus the TTL), and a lease so taken is renewed
// on that clock by Put, whatever time the checkpoint carries.
func testStoreClock(t *testing.T, s checkpoint.Saver) {
	ctx := t.Context()
	before := time.Now().Add(-time.Second)
	l, err := s.Acquire(ctx, "clock", "a", time.Time{}, time.Hour)
	require.NoError(t, err)
	after := time.Now().Add(time.Second)
	require.True(t, l.Expires.After(before.Add(time.Hour)) && l.Expires.Before(after.Add(time.Hour)),
		"expires %v, want about now+1h", l.Expires)

	// The checkpoint's time is long past: a renewal on it would let the
	// lease lapse at once, and b would take the thread over.
	cp := Step("clock", 0)
	cp.Snapshot = []byte(`{}`)
	require.NoError(t, s.Put(ctx, l, cp))
	_, err = s.Acquire(ctx, "clock", "b", time.Time{}, time.Hour)
	require.ErrorIs(t, err, checkpoint.ErrThreadBusy)

	// The same holder renews: same token.
	l2, err := s.Acquire(ctx, "clock", "a", time.Time{}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, l.Token, l2.Token)
}
