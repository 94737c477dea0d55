package nodes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
)

// A first attempt that makes the tests pass by changing how they run (the
// test script of package.json, taskloom's config, a test file of main
// deleted or renamed away, the Makefile make runs them from) fails with
// why, and never reaches main; the honest retry is integrated. A task that
// names such a file may change it.
func TestAttemptsThatWeakenTheTestsFail(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, map[string]string{
		"package.json":         `{"name": "tiny", "scripts": {"test": "go test ./...", "lint": "true"}}` + "\n",
		".project-config.json": "{}\n",
		"Makefile":             "test:\n\tgo test ./...\n",
		"calc/old_test.go":     "package calc\n\nimport \"testing\"\n\nfunc TestOld(t *testing.T) {}\n",
		"calc/kept_test.go":    "package calc\n\nimport \"testing\"\n\nfunc TestKept(t *testing.T) {}\n",
	})
	files := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2": {"calc/sub.go": subGo, "calc/sub_test.go": subTestGo},
		"T3": {"calc/neg.go": negGo, "calc/neg_test.go": negTestGo},
		"T4": {"calc/mul.go": mulGo, "calc/mul_test.go": mulTestGo},
		"T5": {"calc/one.go": helperOneGo, "package.json": `{"name": "tiny", "scripts": {"test": "exit 0"}}` + "\n"},
	}}
	w := agent.WorkerFunc(func(ctx context.Context, job agent.Job) (agent.Outcome, error) {
		out, err := files.Implement(ctx, job)
		if err != nil || job.Attempt > 1 {
			return out, err
		}
		wt := func(name string) string { return filepath.Join(job.Worktree, filepath.FromSlash(name)) }
		switch job.Task.ID {
		case "T1":
			err = os.WriteFile(wt("package.json"), []byte(`{"name": "tiny", "scripts": {"test": "exit 0", "lint": "true"}}`), 0o644)
		case "T2":
			err = os.WriteFile(wt(".project-config.json"), []byte(`{"verify": {"command": ["true"]}}`), 0o644)
		case "T3":
			err = os.Remove(wt("calc/old_test.go"))
		case "T4":
			err = os.Rename(wt("calc/kept_test.go"), wt("calc/kept.txt"))
			if err == nil {
				err = os.WriteFile(wt("Makefile"), []byte("test:\n\ttrue\n"), 0o644)
			}
		}
		return out, err
	})
	t5 := task("T5", "One", []string{"calc/one.go"}, "")
	t5.FilesToModify = []string{"package.json"}
	p := newTestPipeline(t, dir, w, planOf(
		task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T2", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go"),
		task("T3", "Neg", []string{"calc/neg.go"}, "calc/neg_test.go"),
		task("T4", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go"),
		t5,
	))
	p.VerifyCommand = []string{"make", "test"}
	p.Workers = 5
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunCompleted, status, logText(res.State))

	errOf := func(id string) string {
		a, ok := res.State.Attempts.Get(id + "/1")
		require.True(t, ok)
		return a.Error
	}
	const lead = "the attempt changed how the project's tests run, which is not this task's to change: "
	require.Equal(t, lead+`it changed the "test" script of package.json from "go test ./..." to "exit 0" (a task may change such a file only when it names it in its files)`, errOf("T1"))
	require.Equal(t, lead+"it changed .project-config.json, taskloom's own config, which says how tasks are verified (a task may change such a file only when it names it in its files)", errOf("T2"))
	require.Equal(t, lead+"it removed the test file calc/old_test.go (a task may change such a file only when it names it in its files)", errOf("T3"))
	require.Contains(t, errOf("T4"), "it removed the test file calc/kept_test.go")
	require.Contains(t, errOf("T4"), "it changed Makefile, from which make runs the tests")
	require.Empty(t, errOf("T5"), "T5 names package.json")
	for _, id := range []string{"T1", "T2", "T3", "T4"} {
		require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, id))
		require.Contains(t, files.job(t, id, 2).PreviousError, lead, id)
	}
	require.Len(t, trailers(t, dir), 5)
	log := gitT(t, dir, "log", "-p", "main")
	require.NotContains(t, log, `"test": "exit 0", "lint"`)
	require.NotContains(t, log, `["true"]`)
	require.FileExists(t, filepath.Join(dir, "calc", "old_test.go"))
	require.FileExists(t, filepath.Join(dir, "calc", "kept_test.go"))
}

// What the guard counts as a test's source, and which package.json
// scripts it compares.
func TestTestGuardNames(t *testing.T) {
	t.Parallel()
	for f, want := range map[string]bool{
		"calc/add_test.go":                         true,
		"tests/test_cart.py":                       true,
		"src/__tests__/cart.js":                    true,
		"src/__tests__/__snapshots__/cart.js.snap": false,
		"src/__tests__/fixtures/data.json":         false,
		"calc/add.go":                              false,
	} {
		require.Equal(t, want, isTestSource(f), f)
	}
	before := []byte(`{"scripts": {"test": "npm run test:unit", "test:unit": "jest", "build": "tsc"}}`)
	after := []byte(`{"scripts": {"test": "npm run test:unit", "test:unit": "exit 0", "pretest": "true", "build": "tsc"}}`)
	require.Equal(t, []string{"test", "pretest", "test:unit", "e2e"}, npmScripts([][]string{{"npm", "run", "e2e"}}, before, after))
}
