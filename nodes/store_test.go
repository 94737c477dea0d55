package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/storetest"
)

// stepClock is a clock that moves one second forward on every reading.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// last returns the last reading.
func (c *stepClock) last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

var clockStart = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

// setupStore returns a store over a new saver, with a stepClock starting
// at clockStart.
func setupStore(t *testing.T, newDriver storetest.NewDriverFunc) (*nodes.Store, *stepClock) {
	t.Helper()
	clock := &stepClock{t: clockStart}
	s, err := nodes.NewStoreWithOpts(newDriver(t), &nodes.StoreOpts{NowFunc: clock.now})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, clock
}

// forEachStore runs fn in parallel subtests, one per driver, each on a new
// store from setupStore.
func forEachStore(t *testing.T, fn func(t *testing.T, ctx context.Context, s *nodes.Store, clock *stepClock)) {
	t.Helper()
	storetest.ForEachDriver(t, func(t *testing.T, newDriver storetest.NewDriverFunc) {
		t.Parallel()
		s, clock := setupStore(t, newDriver)
		fn(t, context.Background(), s, clock)
	})
}

func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func TestStoreRuns(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, ctx context.Context, s *nodes.Store, clock *stepClock) {

		_, err := s.LatestRun(ctx, "")
		require.ErrorIs(t, err, nodes.ErrRunNotFound)
		runs, err := s.Runs(ctx)
		require.NoError(t, err)
		require.Empty(t, runs)

		// r1 takes its times from the clock (clockStart+1s) and the defaults.
		require.NoError(t, s.CreateRun(ctx, nodes.Run{ID: "r1", ProductPath: "/a/PRODUCT.md", Repo: "/a"}))
		paris := time.FixedZone("CET", 3600)
		r2 := nodes.Run{
			ID: "r2", ProductPath: "/b/PRODUCT.md", Repo: "/b", Status: nodes.RunInterrupted,
			CreatedAt: time.Date(2025, 3, 4, 7, 0, 0, 999, paris), UpdatedAt: time.Date(2025, 3, 4, 8, 0, 0, 1500, paris),
			Meta: json.RawMessage(`{"workers":2,"model":"scripted:x.json"}`),
		}
		require.NoError(t, s.CreateRun(ctx, r2))
		// r3 is on repo /a, created after r1.
		require.NoError(t, s.CreateRun(ctx, nodes.Run{ID: "r3", ProductPath: "/a/PRODUCT.md", Repo: "/a", CreatedAt: clockStart.Add(time.Hour)}))
		// r0 ties with r3 on time: the ID breaks the tie.
		require.NoError(t, s.CreateRun(ctx, nodes.Run{ID: "r0", Repo: "/c", CreatedAt: clockStart.Add(time.Hour)}))

		got, err := s.Run(ctx, "r1")
		require.NoError(t, err)
		want := nodes.Run{
			ID: "r1", ProductPath: "/a/PRODUCT.md", Repo: "/a", Status: nodes.RunRunning,
			CreatedAt: micro(clockStart.Add(time.Second)), UpdatedAt: micro(clockStart.Add(time.Second)),
			Meta: json.RawMessage(`{}`),
		}
		require.Equal(t, want, got)

		got, err = s.Run(ctx, "r2")
		require.NoError(t, err)
		require.Equal(t, micro(r2.CreatedAt), got.CreatedAt)
		require.Equal(t, time.UTC, got.CreatedAt.Location())
		require.Equal(t, micro(r2.UpdatedAt), got.UpdatedAt)
		require.Equal(t, nodes.RunInterrupted, got.Status)
		require.JSONEq(t, string(r2.Meta), string(got.Meta))

		err = s.CreateRun(ctx, nodes.Run{ID: "r1", Repo: "/z"})
		require.ErrorIs(t, err, nodes.ErrRunExists)
		got, err = s.Run(ctx, "r1")
		require.NoError(t, err)
		require.Equal(t, "/a", got.Repo, "a refused CreateRun must not change the stored run")

		require.ErrorContains(t, s.CreateRun(ctx, nodes.Run{ID: "bad", Status: "sleeping"}), `got "sleeping"`)
		require.ErrorContains(t, s.CreateRun(ctx, nodes.Run{ID: "bad", Meta: json.RawMessage(`{`)}), "meta is not valid JSON")
		require.Error(t, s.CreateRun(ctx, nodes.Run{}))
		_, err = s.Run(ctx, "bad")
		require.ErrorIs(t, err, nodes.ErrRunNotFound)

		_, err = s.Run(ctx, "nope")
		require.ErrorIs(t, err, nodes.ErrRunNotFound)
		require.ErrorContains(t, err, "nope")

		require.NoError(t, s.SetRunStatus(ctx, "r1", nodes.RunCompleted))
		got, err = s.Run(ctx, "r1")
		require.NoError(t, err)
		require.Equal(t, nodes.RunCompleted, got.Status)
		require.Equal(t, micro(clockStart.Add(time.Second)), got.CreatedAt)
		require.Equal(t, micro(clock.last()), got.UpdatedAt)
		require.True(t, got.UpdatedAt.After(got.CreatedAt))

		err = s.SetRunStatus(ctx, "nope", nodes.RunFailed)
		require.ErrorIs(t, err, nodes.ErrRunNotFound)
		require.ErrorContains(t, err, "nope")
		require.ErrorContains(t, s.SetRunStatus(ctx, "r1", "done"), `got "done"`)

		runs, err = s.Runs(ctx)
		require.NoError(t, err)
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		// r3 and r0 (06:06:07 UTC) are newer than r2 (06:00 UTC, 07:00 in CET).
		require.Equal(t, []string{"r3", "r0", "r2", "r1"}, ids, "newest first, then by ID descending")

		latest, err := s.LatestRun(ctx, "/a")
		require.NoError(t, err)
		require.Equal(t, "r3", latest.ID)
		latest, err = s.LatestRun(ctx, "/b")
		require.NoError(t, err)
		require.Equal(t, "r2", latest.ID)
		latest, err = s.LatestRun(ctx, "")
		require.NoError(t, err)
		require.Equal(t, "r3", latest.ID)
		_, err = s.LatestRun(ctx, "/elsewhere")
		require.ErrorIs(t, err, nodes.ErrRunNotFound)
		require.ErrorContains(t, err, "/elsewhere")
	})
}

// record returns a conversation with turns UI and API messages, so that a
// reader can check that it sees one whole version.
func record(id, parent, root string, turns int) *agent.Record {
	rec := &agent.Record{Meta: agent.Metadata{
		ID: id, ParentID: parent, RootID: root, Mode: "code", Status: agent.StatusActive,
		Worktree: "/wt/" + id, Turns: turns, CreatedAt: 1700000000000, UpdatedAt: 1700000000000 + int64(turns),
		Usage: agent.Usage{InputTokens: 10 * turns, OutputTokens: turns},
	}}
	for i := range turns {
		rec.UI = append(rec.UI, agent.UIMessage{TS: int64(i), Type: agent.UISay, Say: agent.SayText, Text: fmt.Sprintf("turn %d of %s", i, id)})
		rec.API = append(rec.API, agent.APIMessage{Role: agent.RoleAssistant, TS: int64(i), Content: []agent.Block{
			{Type: agent.BlockText, Text: "writing"},
			{Type: agent.BlockToolUse, ID: "call_" + strconv.Itoa(i), Name: "write_to_file", Input: json.RawMessage(`{"content":"package a\n","path":"a.go"}`)},
		}})
	}
	return rec
}

func TestStoreHistories(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, ctx context.Context, s *nodes.Store, _ *stepClock) {
		h := s.Histories("run-1")

		_, err := h.Load(ctx, "run-1/T1/1")
		require.ErrorIs(t, err, agent.ErrNotFound)
		require.ErrorContains(t, err, "run-1/T1/1")

		recs := []*agent.Record{
			record("run-1/T1/2/i10", "", "run-1/T1/2/i10", 1),
			record("run-1/T1/2", "", "run-1/T1/2", 2),
			record("run-1/T1/2.1", "run-1/T1/2", "run-1/T1/2", 1),
			record("run-1/T1/2/i2", "", "run-1/T1/2/i2", 1),
			record("run-1/T1/1", "", "", 3), // no RootID: its ID is the root
			record("run-1/T1/2/i1", "", "run-1/T1/2/i1", 1),
			record("run-1/T1-a/1", "", "run-1/T1-a/1", 1),
		}
		for _, rec := range recs {
			require.NoError(t, h.Save(ctx, rec))
		}
		for _, rec := range recs {
			got, err := h.Load(ctx, rec.Meta.ID)
			require.NoError(t, err)
			require.Equal(t, rec, got)
		}

		// Save replaces the whole record.
		v2 := record("run-1/T1/1", "", "run-1/T1/1", 5)
		v2.Meta.Status = agent.StatusCompleted
		v2.Meta.Completion = "done"
		require.NoError(t, h.Save(ctx, v2))
		got, err := h.Load(ctx, "run-1/T1/1")
		require.NoError(t, err)
		require.Equal(t, v2, got)

		// Empty histories load as empty, not null.
		empty := &agent.Record{Meta: agent.Metadata{ID: "run-1/T9/1", RootID: "run-1/T9/1"}}
		require.NoError(t, h.Save(ctx, empty))
		got, err = h.Load(ctx, "run-1/T9/1")
		require.NoError(t, err)
		require.Empty(t, got.UI)
		require.Empty(t, got.API)
		require.Equal(t, empty.Meta, got.Meta)

		ids, err := s.Conversations(ctx, "run-1", "T1")
		require.NoError(t, err)
		require.Equal(t, []string{"run-1/T1/1", "run-1/T1/2", "run-1/T1/2/i1", "run-1/T1/2/i2", "run-1/T1/2/i10"}, ids)
		ids, err = s.Conversations(ctx, "run-1", "T1-a")
		require.NoError(t, err)
		require.Equal(t, []string{"run-1/T1-a/1"}, ids)
		ids, err = s.Conversations(ctx, "run-1", "T7")
		require.NoError(t, err)
		require.Empty(t, ids)

		// Another run's histories are apart.
		other := s.Histories("run-2")
		_, err = other.Load(ctx, "run-1/T1/1")
		require.ErrorIs(t, err, agent.ErrNotFound)
		require.NoError(t, other.Save(ctx, record("run-2/T1/1", "", "run-2/T1/1", 1)))
		ids, err = s.Conversations(ctx, "run-2", "T1")
		require.NoError(t, err)
		require.Equal(t, []string{"run-2/T1/1"}, ids)
		ids, err = s.Conversations(ctx, "run-1", "T1")
		require.NoError(t, err)
		require.Len(t, ids, 5)

		// IDs that are not the run's are refused and not stored.
		for _, id := range []string{"run-2/T1/1", "T1/1", "run-1/T1", "run-1/T1/x", "run-1//1"} {
			err := h.Save(ctx, record(id, "", id, 1))
			require.ErrorContains(t, err, "is not run-1/TASK_ID/ATTEMPT", "id %q", id)
		}
		require.Error(t, h.Save(ctx, &agent.Record{}))
		_, err = h.Load(ctx, "run-1/T1/x")
		require.ErrorIs(t, err, agent.ErrNotFound)
	})
}

func TestStoreHistoriesExport(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, ctx context.Context, s *nodes.Store, _ *stepClock) {
		h := s.Histories("run-1")

		root := record("run-1/T1/1", "", "run-1/T1/1", 2)
		root.Meta.ChildIDs = []string{"run-1/T1/1.1"}
		child := record("run-1/T1/1.1", "run-1/T1/1", "run-1/T1/1", 1)
		child.Meta.Depth = 1
		require.NoError(t, h.Save(ctx, root))
		require.NoError(t, h.Save(ctx, child))

		ids, err := s.Conversations(ctx, "run-1", "T1")
		require.NoError(t, err)
		require.Equal(t, []string{"run-1/T1/1"}, ids)

		dir := t.TempDir()
		require.NoError(t, agent.Export(ctx, h, ids[len(ids)-1], dir))
		for _, c := range []struct {
			dir string
			rec *agent.Record
		}{{dir, root}, {filepath.Join(dir, "subtask-1"), child}} {
			// The files are indented JSON: compare them as JSON.
			requireFileJSON(t, filepath.Join(c.dir, agent.TaskMetadataFile), c.rec.Meta)
			requireFileJSON(t, filepath.Join(c.dir, agent.UIMessagesFile), c.rec.UI)
			requireFileJSON(t, filepath.Join(c.dir, agent.APIHistoryFile), c.rec.API)
		}
	})
}

// requireFileJSON checks that the file at path holds want as JSON.
func requireFileJSON(t *testing.T, path string, want any) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	data, err := json.Marshal(want)
	require.NoError(t, err)
	require.JSONEq(t, string(data), string(got), path)
}

func TestStoreHistoriesConcurrentSaves(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, ctx context.Context, s *nodes.Store, _ *stepClock) {
		h := s.Histories("run-1")
		const writers, versions = 4, 15
		shared := "run-1/T0/1"
		require.NoError(t, h.Save(ctx, record(shared, "", shared, 1)))

		// consistent reports whether rec is one whole version.
		consistent := func(rec *agent.Record) error {
			n := rec.Meta.Turns
			if len(rec.UI) != n || len(rec.API) != n || rec.Meta.Usage.InputTokens != 10*n {
				return fmt.Errorf("torn record %s: turns %d, %d ui, %d api, %d input tokens",
					rec.Meta.ID, n, len(rec.UI), len(rec.API), rec.Meta.Usage.InputTokens)
			}
			return nil
		}

		var wg sync.WaitGroup
		errs := make(chan error, writers+1)
		done := make(chan struct{})
		reads := 0
		var readerWG sync.WaitGroup
		readerWG.Go(func() {
			for {
				rec, err := h.Load(ctx, shared)
				if err == nil {
					err = consistent(rec)
				}
				if err != nil {
					errs <- err
					return
				}
				reads++
				select {
				case <-done:
					return
				default:
				}
			}
		})
		for w := range writers {
			wg.Go(func() {
				own := fmt.Sprintf("run-1/T%d/1", w+1)
				for v := 1; v <= versions; v++ {
					for _, id := range []string{own, shared} {
						if err := h.Save(ctx, record(id, "", id, v)); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(done)
		readerWG.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Positive(t, reads)

		for w := range writers {
			id := fmt.Sprintf("run-1/T%d/1", w+1)
			got, err := h.Load(ctx, id)
			require.NoError(t, err)
			require.Equal(t, record(id, "", id, versions), got)
		}
		got, err := h.Load(ctx, shared)
		require.NoError(t, err)
		require.NoError(t, consistent(got))
		require.Equal(t, versions, got.Meta.Turns, "every writer saves the shared record last at the last version")
	})
}

func TestNewStore(t *testing.T) {
	t.Parallel()
	_, err := nodes.NewStore(nil)
	require.ErrorContains(t, err, "nil records")

	// A store sees the runs another store wrote in the same database.
	d := storetest.NewSQLite(t)
	a, err := nodes.NewStore(d)
	require.NoError(t, err)
	require.NoError(t, a.CreateRun(context.Background(), nodes.Run{ID: "r1", Repo: "/a"}))
	b, err := nodes.NewStore(d)
	require.NoError(t, err)
	got, err := b.LatestRun(context.Background(), "/a")
	require.NoError(t, err)
	require.Equal(t, "r1", got.ID)
}

func TestParseConversationID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id                 string
		task               string
		attempt, iteration int
		ok                 bool
	}{
		{"r/T1/1", "T1", 1, 0, true},
		{"r/T1-a/12", "T1-a", 12, 0, true},
		{"r/T1/2/i3", "T1", 2, 3, true},
		{"r/T1/2.1", "T1", 2, 0, true},
		{"r/T1/2.1.3", "T1", 2, 0, true},
		{"r/T1/2/i3.2", "T1", 2, 3, true},
		{"r/a/b/3", "a/b", 3, 0, true},
		{"r/i5/1", "i5", 1, 0, true},
		{"r/T1", "", 0, 0, false},
		{"r/T1/0", "", 0, 0, false},
		{"r/T1/-1", "", 0, 0, false},
		{"r/T1/+1", "", 0, 0, false},
		{"r/T1/i1", "", 0, 0, false},
		{"r/T1/1/i0", "", 0, 0, false},
		{"r/T1/1/ix", "", 0, 0, false},
		{"r//1", "", 0, 0, false},
		{"rr/T1/1", "", 0, 0, false},
		{"T1/1", "", 0, 0, false},
		{"", "", 0, 0, false},
	}
	for _, tt := range tests {
		task, attempt, iteration, err := nodes.ParseConversationID("r", tt.id)
		if !tt.ok {
			if err == nil {
				t.Errorf("ParseConversationID(r, %q) = %q, %d, %d; want an error", tt.id, task, attempt, iteration)
			}
			continue
		}
		if err != nil || task != tt.task || attempt != tt.attempt || iteration != tt.iteration {
			t.Errorf("ParseConversationID(r, %q) = %q, %d, %d, %v; want %q, %d, %d",
				tt.id, task, attempt, iteration, err, tt.task, tt.attempt, tt.iteration)
		}
	}
	// The IDs the agent worker makes parse back.
	task, attempt, iteration, err := nodes.ParseConversationID("run-7", agent.ConversationID("run-7", "T3-b", 2, 4))
	require.NoError(t, err)
	require.Equal(t, []any{"T3-b", 2, 4}, []any{task, attempt, iteration})
}

func ExampleStore() {
	ctx := context.Background()
	runs, err := nodes.NewStore(store.NewMemory())
	if err != nil {
		panic(err)
	}
	defer runs.Close()
	if err := runs.CreateRun(ctx, nodes.Run{ID: "run-1", ProductPath: "PRODUCT.md", Repo: "/src/app"}); err != nil {
		panic(err)
	}
	if err := runs.SetRunStatus(ctx, "run-1", nodes.RunCompleted); err != nil {
		panic(err)
	}
	run, err := runs.LatestRun(ctx, "/src/app")
	if err != nil {
		panic(err)
	}
	fmt.Println(run.ID, run.Status)

	h := runs.Histories("run-1")
	id := agent.ConversationID("run-1", "T1", 1, 0)
	rec := &agent.Record{Meta: agent.Metadata{ID: id, RootID: id, Status: agent.StatusCompleted}}
	if err := h.Save(ctx, rec); err != nil {
		panic(err)
	}
	ids, err := runs.Conversations(ctx, "run-1", "T1")
	if err != nil {
		panic(err)
	}
	fmt.Println(ids)

	_, err = runs.Run(ctx, "run-2")
	fmt.Println(errors.Is(err, nodes.ErrRunNotFound), err)
	// Output:
	// run-1 completed
	// [run-1/T1/1]
	// true get run run-2: run not found
}
