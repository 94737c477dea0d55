package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
)

// goldenPlans are the realistic specs under testdata/plans: each has a
// PRODUCT.md with a task list, optionally a repo/ directory that is the
// repository the plan is for, and plan.json.golden, the plan it gives.
var goldenPlans = []string{"webapp", "pyservice", "gocli", "twenty", "twenty-criteria"}

// goldenPlan builds the plan of testdata/plans/name.
func goldenPlan(t *testing.T, name string) (*Plan, *RawPlan) {
	t.Helper()
	dir := filepath.Join("testdata", "plans", name)
	md, err := os.ReadFile(filepath.Join(dir, "PRODUCT.md"))
	require.NoError(t, err)
	opts := &Opts{}
	if st, err := os.Stat(filepath.Join(dir, "repo")); err == nil && st.IsDir() {
		opts.Repo = filepath.Join(dir, "repo")
	}
	raw, err := Breakdown(context.Background(), nil, string(md), opts)
	require.NoError(t, err)
	p, err := Build(raw, opts)
	require.NoError(t, err)
	return p, raw
}

func TestGoldenPlans(t *testing.T) {
	t.Parallel()
	for _, name := range goldenPlans {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, raw := goldenPlan(t, name)
			got, err := json.MarshalIndent(p, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			var table bytes.Buffer
			require.NoError(t, p.WriteTable(&table))
			for file, data := range map[string][]byte{"plan.json.golden": got, "plan.table.golden": table.Bytes()} {
				golden := filepath.Join("testdata", "plans", name, file)
				if testkit.Updating() { // go test -run TestGoldenPlans -update rewrites the golden files
					require.NoError(t, os.WriteFile(golden, data, 0o644))
					continue
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err, "run go test ./planner -run TestGoldenPlans -update")
				require.Equal(t, string(want), string(data), "%s differs; if the change is intended, rerun with -update", golden)
			}
			for _, rt := range raw.Tasks {
				if len(leavesOf(p, rt.ID)) > 0 {
					requireSplitQuality(t, p, rt, resolvedT(t, nil))
				}
			}
		})
	}
}
