package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
)

const planData = "testdata/plan"

// runPlan runs taskloom with args and returns the exit code and streams.
func runPlan(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func requireGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(planData, name+".golden")
	if testkit.Updating() { // go test -run TestPlan -update rewrites the golden files
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run with -update")
	require.Equal(t, string(want), got, "output differs from %s (rerun with -update if the change is intended)", path)
}

func TestPlanGolden(t *testing.T) {
	// Not parallel: --repo defaults to the current directory, so point it
	// at an empty one.
	repo := t.TempDir()
	tasks := filepath.Join(planData, "tasks.json")
	product := filepath.Join(planData, "PRODUCT.md")
	session := "scripted:" + filepath.Join(planData, "session.json")
	tests := []struct {
		golden string
		args   []string
	}{
		{"tasks.table", []string{"plan", "--tasks", tasks, "--workers", "2"}},
		{"tasks.json", []string{"plan", "--tasks", tasks, "--workers", "2", "--json"}},
		{"tasks.mermaid", []string{"plan", "--tasks", tasks, "--mermaid"}},
		// The scripted breakdown of PRODUCT.md answers with tasks.json: the
		// same plan, so the same golden file.
		{"tasks.json", []string{"plan", product, "--model", session, "--workers", "2", "--json"}},
		{"product_tasks.table", []string{"plan", filepath.Join(planData, "PRODUCT_tasks.md")}},
		{"product_tasks.mermaid", []string{"plan", filepath.Join(planData, "PRODUCT_tasks.md"), "--mermaid"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			code, out, errOut := runPlan(t, append(tt.args, "--repo", repo)...)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			require.Empty(t, errOut)
			requireGolden(t, tt.golden, out)
		})
	}
}

func TestPlanCycle(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	code, out, errOut := runPlan(t, "plan", "--tasks", filepath.Join(planData, "cycle.json"), "--repo", repo)
	require.Equal(t, 1, code)
	require.Equal(t, "taskloom: plan: 2 dependency cycles:\n  T2 -> T5 -> T2 (T2 creates server/server.go)\n  T3 -> T3; remove one dependency of each cycle "+
		"(file-based dependencies count: a task that modifies or tests a file depends on its creator)\n", errOut)
	requireGolden(t, "cycle.table", out)

	code, out, _ = runPlan(t, "plan", "--tasks", filepath.Join(planData, "cycle.json"), "--repo", repo, "--json")
	require.Equal(t, 1, code)
	require.Contains(t, out, `"cycles": [
    [
      "T2",
      "T5",
      "T2"
    ],`)
}

func TestPlanErrors(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	badConfig := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(badConfig, ".project-config.json"), []byte(`{"task_size_limits": {"max_files": 3}}`), 0o644))
	rangeConfig := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(rangeConfig, ".project-config.json"), []byte(`{"task_size_limits": {"complexity_threshold": 20}}`), 0o644))
	typeConfig := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(typeConfig, ".project-config.json"), []byte(`{"task_size_limits": {"auto_split": "yes"}}`), 0o644))
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"nothing to plan", []string{"plan"}, 2, "taskloom: plan: give a PRODUCT.md to break down, or --tasks RAW.json\n"},
		{"both inputs", []string{"plan", "P.md", "--tasks", "t.json"}, 2, "taskloom: plan: give either a PRODUCT.md or --tasks RAW.json, not both\n"},
		{"two formats", []string{"plan", "--tasks", "t.json", "--json", "--mermaid"}, 2, "taskloom: plan: --json and --mermaid cannot be used together\n"},
		{"no workers", []string{"plan", "--tasks", "t.json", "--workers", "0"}, 2, "taskloom: plan: --workers must be from 1 to 256, got 0\n"},
		{"two arguments", []string{"plan", "a.md", "b.md"}, 2, "taskloom: plan: accepts at most 1 arg(s), received 2; usage: taskloom plan [PRODUCT.md] [flags]\n"},
		{"workers not a number", []string{"plan", "--tasks", "t.json", "--workers", "abc"}, 2, "taskloom: --workers wants a number, got \"abc\"\n"},
		{"missing file", []string{"plan", "--tasks", "testdata/plan/nope.json", "--repo", repo}, 1,
			"taskloom: plan: open testdata/plan/nope.json: no such file or directory\n"},
		{"unknown dependency", []string{"plan", "--tasks", "testdata/plan/invalid.json", "--repo", repo}, 1,
			"taskloom: plan: testdata/plan/invalid.json: tasks[3].dependencies[0]: unknown task \"T9\"\n"},
		{"not JSON", []string{"plan", "--tasks", "testdata/plan/PRODUCT.md", "--repo", repo}, 1,
			"taskloom: plan: testdata/plan/PRODUCT.md: invalid JSON at line 1, column 1: invalid character '#' looking for beginning of value\n"},
		{"no model", []string{"plan", "testdata/plan/PRODUCT.md", "--repo", repo}, 1,
			"taskloom: plan: testdata/plan/PRODUCT.md has no explicit task list, so the breakdown needs a model: model spec \"anthropic:claude-sonnet-4-5\": missing API key: set ANTHROPIC_API_KEY; pass --model SPEC (for example scripted:session.json), set TASKLOOM_MODEL or the config's model\n"},
		{"a model that never answers validly", []string{"plan", "testdata/plan/PRODUCT.md", "--repo", repo, "--model", "scripted:testdata/plan/never_valid_session.json"}, 1,
			`level=WARN msg="planner: invalid breakdown answer" attempt=1 problems=1 first="the reply contains no JSON object; reply with the raw tasks JSON object only"` + "\n" +
				`level=WARN msg="planner: invalid breakdown answer" attempt=2 problems=1 first="tasks: must have at least one task (taskloom never invents placeholder tasks)"` + "\n" +
				`level=WARN msg="planner: invalid breakdown answer" attempt=3 problems=1 first="invalid JSON at line 1, column 92: unexpected end of input (the JSON is truncated)"` + "\n" +
				"taskloom: plan: testdata/plan/PRODUCT.md: breakdown: the model gave no valid plan after 3 attempts; problems in its last answer: " +
				"invalid JSON at line 1, column 92: unexpected end of input (the JSON is truncated)\n"},
		{"unknown limit", []string{"plan", "--tasks", "testdata/plan/tasks.json", "--repo", badConfig}, 1,
			"taskloom: plan: unknown key \"task_size_limits.max_files\" in " + filepath.Join(badConfig, ".project-config.json") + "\n"},
		{"limit out of range", []string{"plan", "--tasks", "testdata/plan/tasks.json", "--repo", rangeConfig}, 1,
			"taskloom: plan: task_size_limits.complexity_threshold: must be between 0 and 13, got 20 (from " + filepath.Join(rangeConfig, ".project-config.json") + ")\n"},
		{"limit of the wrong type", []string{"plan", "--tasks", "testdata/plan/tasks.json", "--repo", typeConfig}, 1,
			"taskloom: plan: task_size_limits.auto_split: must be true or false, got \"yes\" (from " + filepath.Join(typeConfig, ".project-config.json") + ")\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runPlan(t, tt.args...)
			require.Equal(t, tt.code, code, "stderr: %s", errOut)
			require.Equal(t, tt.wantErr, errOut)
			require.Empty(t, out, "nothing on stdout")
		})
	}
}

func TestPlanConfigLimits(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".project-config.json"),
		[]byte(`{"model": "anthropic:x", "task_size_limits": {"auto_split": false, "max_files_to_create": 20}}`), 0o644))
	code, out, errOut := runPlan(t, "plan", "--tasks", filepath.Join(planData, "tasks.json"), "--repo", repo)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.NotContains(t, out, "Splits")
	require.Contains(t, out, "T3: complexity 6.25 (MEDIUM) is above complexity_threshold 5 and auto_split is off")
	require.NotContains(t, out, "above max_files_to_create")
}

func TestPlanModelFromEnv(t *testing.T) {
	t.Setenv("TASKLOOM_MODEL", "scripted:"+filepath.Join(planData, "session.json"))
	code, out, errOut := runPlan(t, "plan", filepath.Join(planData, "PRODUCT.md"), "--repo", t.TempDir())
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "T3-a  Todo REST API [data layer]")
}

// TestPlanUsesConfigLikeRun: plan reads parallel_workers (and the rest) as
// run does: --workers over the config file, --config over the repo's.
func TestPlanUsesConfigLikeRun(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".project-config.json"), []byte(`{"parallel_workers": 3}`), 0o644))
	other := filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(other, []byte(`{"parallel_workers": 4}`), 0o644))
	tasks := filepath.Join(planData, "tasks.json")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 3},
		{[]string{"--workers", "2"}, 2},
		{[]string{"--config", other}, 4},
	} {
		code, out, errOut := runPlan(t, append([]string{"plan", "--tasks", tasks, "--repo", repo}, tc.args...)...)
		require.Equal(t, 0, code, "stderr: %s", errOut)
		require.Contains(t, out, fmt.Sprintf("with %d worker(s) about", tc.want), "args %v", tc.args)
		require.Contains(t, out, fmt.Sprintf("\nParallel waves with %d worker(s)", tc.want), "args %v", tc.args)
	}
	code, out, errOut := runPlan(t, "plan", "--tasks", tasks, "--repo", repo, "--json")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, `"workers": 3,`)
}
