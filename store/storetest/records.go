package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/store"
)

// NewRecordsFunc returns new, empty records that live until the test ends.
type NewRecordsFunc func(t *testing.T) store.Records

// T0 is the time the suite's records start at: UTC, whole microseconds, as
// Records is given them.
var T0 = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)

// RunRecords runs the Records conformance suite, one parallel subtest per
// behaviour, each on new records from newRecords.
func RunRecords(t *testing.T, newRecords NewRecordsFunc) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, r store.Records)
	}{
		{"CreateGetRun", testCreateGetRun},
		{"RunExists", testRunExists},
		{"SetRunStatus", testSetRunStatus},
		{"ListRuns", testListRuns},
		{"Histories", testHistories},
		{"ConversationLists", testConversationLists},
		{"ConcurrentSaves", testConcurrentSaves},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newRecords(t))
		})
	}
}

func run(id, repo string, created time.Time) store.Run {
	return store.Run{ID: id, ProductPath: repo + "/PRODUCT.md", Repo: repo, Status: "running",
		CreatedAt: created, UpdatedAt: created, Meta: json.RawMessage(`{"workers":2}`)}
}

func ids(runs []store.Run) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func testCreateGetRun(t *testing.T, r store.Records) {
	ctx := t.Context()
	want := run("r1", "/a", T0)
	want.UpdatedAt = T0.Add(time.Second)
	require.NoError(t, r.CreateRun(ctx, want))
	got, err := r.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, time.UTC, got.CreatedAt.Location())
	require.Equal(t, want, got)
	_, err = r.GetRun(ctx, "nope")
	require.ErrorIs(t, err, store.ErrRunNotFound)
}

func testRunExists(t *testing.T, r store.Records) {
	ctx := t.Context()
	require.NoError(t, r.CreateRun(ctx, run("r1", "/a", T0)))
	require.ErrorIs(t, r.CreateRun(ctx, run("r1", "/z", T0.Add(time.Hour))), store.ErrRunExists)
	got, err := r.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, "/a", got.Repo, "a refused CreateRun changes nothing")
}

func testSetRunStatus(t *testing.T, r store.Records) {
	ctx := t.Context()
	require.NoError(t, r.CreateRun(ctx, run("r1", "/a", T0)))
	require.NoError(t, r.SetRunStatus(ctx, "r1", "completed", T0.Add(time.Minute)))
	got, err := r.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, "completed", got.Status)
	require.Equal(t, T0, got.CreatedAt)
	require.Equal(t, T0.Add(time.Minute), got.UpdatedAt)
	require.ErrorIs(t, r.SetRunStatus(ctx, "nope", "failed", T0), store.ErrRunNotFound)
}

func testListRuns(t *testing.T, r store.Records) {
	ctx := t.Context()
	all, err := r.ListRuns(ctx, store.ListRunsParams{})
	require.NoError(t, err)
	require.Empty(t, all)
	for _, rn := range []store.Run{
		run("r1", "/a", T0),
		run("r2", "/b", T0.Add(time.Second)),
		run("r3", "/a", T0.Add(time.Hour)),
		run("r0", "/c", T0.Add(time.Hour)), // ties with r3: the ID breaks it
	} {
		require.NoError(t, r.CreateRun(ctx, rn))
	}
	for _, tc := range []struct {
		params store.ListRunsParams
		want   []string
	}{
		{store.ListRunsParams{}, []string{"r3", "r0", "r2", "r1"}},
		{store.ListRunsParams{Limit: 2}, []string{"r3", "r0"}},
		{store.ListRunsParams{Repo: "/a"}, []string{"r3", "r1"}},
		{store.ListRunsParams{Repo: "/a", Limit: 1}, []string{"r3"}},
		{store.ListRunsParams{Repo: "/none"}, []string{}},
	} {
		got, err := r.ListRuns(ctx, tc.params)
		require.NoError(t, err)
		require.Equal(t, tc.want, ids(got), "ListRuns(%+v)", tc.params)
	}
}

func history(runID, id, parent, task string, attempt int, at time.Time) store.History {
	return store.History{RunID: runID, ConversationID: id, ParentID: parent, TaskID: task, Attempt: attempt,
		UI: `[]`, API: fmt.Sprintf(`[{"turn":%d}]`, attempt), Meta: fmt.Sprintf(`{"id":%q}`, id), UpdatedAt: at}
}

func testHistories(t *testing.T, r store.Records) {
	ctx := t.Context()
	h := history("run", "run/T1/1", "", "T1", 1, T0)
	require.NoError(t, r.SaveHistory(ctx, h))
	got, err := r.GetHistory(ctx, "run", "run/T1/1")
	require.NoError(t, err)
	require.Equal(t, h, got)

	// Saving again replaces the whole record.
	h2 := history("run", "run/T1/1", "run/T0/1", "T1", 2, T0.Add(time.Second))
	h2.UI = `[{"say":"hi"}]`
	require.NoError(t, r.SaveHistory(ctx, h2))
	got, err = r.GetHistory(ctx, "run", "run/T1/1")
	require.NoError(t, err)
	require.Equal(t, h2, got)

	_, err = r.GetHistory(ctx, "other-run", "run/T1/1")
	require.ErrorIs(t, err, store.ErrNotFound, "histories are per run")
	_, err = r.GetHistory(ctx, "run", "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testConversationLists checks the two lists of a task's conversations:
// their IDs, and an attempt's metadata; subtasks are in neither.
func testConversationLists(t *testing.T, r store.Records) {
	ctx := t.Context()
	for _, h := range []store.History{
		history("run", "run/T1/1", "", "T1", 1, T0),
		history("run", "run/T1/1/i2", "", "T1", 1, T0),
		history("run", "run/T1/1.1", "run/T1/1", "T1", 1, T0),
		history("run", "run/T1/2", "", "T1", 2, T0),
		history("run", "run/T2/1", "", "T2", 1, T0),
		history("other", "other/T1/1", "", "T1", 1, T0),
	} {
		require.NoError(t, r.SaveHistory(ctx, h))
	}
	got, err := r.RootConversations(ctx, "run", "T1")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"run/T1/1", "run/T1/1/i2", "run/T1/2"}, got)
	got, err = r.RootConversations(ctx, "run", "T9")
	require.NoError(t, err)
	require.Empty(t, got)

	got, err = r.AttemptMetas(ctx, "run", "T1", 1)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{`{"id":"run/T1/1"}`, `{"id":"run/T1/1/i2"}`}, got)
	got, err = r.AttemptMetas(ctx, "run", "T1", 3)
	require.NoError(t, err)
	require.Empty(t, got)
}

func testConcurrentSaves(t *testing.T, r store.Records) {
	ctx := t.Context()
	const writers, saves = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range saves {
				h := history("run", fmt.Sprintf("run/T%d/1", w), "", fmt.Sprintf("T%d", w), 1, T0.Add(time.Duration(i)*time.Second))
				if err := r.SaveHistory(ctx, h); err != nil {
					t.Errorf("writer %d save %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range writers {
		got, err := r.GetHistory(ctx, "run", fmt.Sprintf("run/T%d/1", w))
		require.NoError(t, err)
		require.Equal(t, T0.Add((saves-1)*time.Second), got.UpdatedAt, "writer %d's last save", w)
	}
}
