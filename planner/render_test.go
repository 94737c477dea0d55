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

func TestWriteMermaidFullTitlesAndCriticalPath(t *testing.T) {
	t.Parallel()
	long := rt("T2", "T1")
	long.Title = `A title of more than forty characters with "quotes", <tags> & C# in it`
	p := build(t, rawPlan(rt("T1"), long, rt("T3")), nil)
	p.Schedule.CriticalPath = []string{"T1", "T2"}
	var b bytes.Buffer
	require.NoError(t, p.WriteMermaid(&b))
	out := b.String()
	require.Contains(t, out, `    t1["T2: A title of more than forty characters with #quot;quotes#quot;, #lt;tags#gt; & C#35; in it<br/>`, "the whole title, escaped")
	require.Contains(t, out, "  %% critical path: T1 -> T2\n")
	require.Contains(t, out, "  t0 ==> t1\n", "a critical edge is thick")
	require.Contains(t, out, "  class t0,t1 criticalPath\n")
	require.Contains(t, out, "  linkStyle 0 stroke:#1c64f2,stroke-width:4px\n")
	require.NotContains(t, out, "t2 criticalPath")
}

func TestWriteTableWaves(t *testing.T) {
	t.Parallel()
	p := build(t, rawPlan(rt("T1"), rt("T2", "T1"), rt("T3")), nil)
	p.Schedule.Waves = [][]string{{"T1", "T3"}, {"T2"}}
	p.Schedule.Workers = 2
	var b bytes.Buffer
	require.NoError(t, p.WriteTable(&b))
	require.True(t, strings.HasSuffix(b.String(),
		"\nParallel waves with 2 worker(s) (2; a wave starts when the one before is integrated):\n  1  T1, T3\n  2  T2\n"), b.String())
}
