package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteMermaidLevelsAndCycles(t *testing.T) {
	t.Parallel()
	big := RawTask{ID: "T3", Title: `Big "quoted"`, UserStory: "s", MilestoneID: "M1", AcceptanceCriteria: []string{"ok"}, FilesToCreate: files(12, 3)}
	l := DefaultLimits()
	l.AutoSplit = false
	p, err := Build(rawPlan(rt("T1", "T2"), rt("T2", "T1"), big), &Opts{Limits: &l})
	require.ErrorIs(t, err, ErrCycle)
	var b bytes.Buffer
	require.NoError(t, p.WriteMermaid(&b))
	out := b.String()
	require.Contains(t, out, "  subgraph m0[\"M1: One\"]\n")
	require.Contains(t, out, `    t2["T3: Big #quot;quoted#quot;<br/>6.00 MEDIUM"]`)
	require.Contains(t, out, "  t1 --> t0\n  t0 --> t1\n")
	require.Contains(t, out, "  class t0,t1 low\n  class t2 medium\n")
	require.Contains(t, out, "  linkStyle 0,1 stroke:#c82333,stroke-width:3px\n")
	require.NotContains(t, out, "class  high")

	b.Reset()
	require.NoError(t, p.WriteTable(&b))
	require.True(t, strings.HasSuffix(b.String(), "Dependency cycles (1):\n  T1 -> T2 -> T1\n"), b.String())
}
