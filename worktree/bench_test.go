package worktree_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkWorktree measures one task attempt's create + commit + integrate
// on a repository of 5,000 files, and the raw git commands that do the same
// work (worktree add -b, add -A, commit, merge --ff-only in main's
// checkout), alternating which goes first. Removing the worktrees is not
// timed. The 100-file case shows the fixed cost of taskloom's extra checks,
// which the checkout of 5,000 files otherwise hides.
func BenchmarkWorktree(b *testing.B) {
	for _, size := range []int{5000, 100} {
		b.Run(fmt.Sprintf("files=%d", size), func(b *testing.B) { benchmarkWorktree(b, size) })
	}
}

func benchmarkWorktree(b *testing.B, size int) {
	ctx := context.Background()
	files := make(map[string]string, size)
	for i := range size {
		files[fmt.Sprintf("pkg%02d/file%04d.go", i%50, i)] = fmt.Sprintf("package pkg%02d\n\n// File %d.\nconst C%d = %d\n", i%50, i, i, i)
	}
	repo := setup(b, "repo", files)
	gitT(b, repo, "repack", "-a", "-d", "-q") // as a real repository of that size would be
	m := open(b, repo, nil)
	rawDir := filepath.Join(repo, ".taskloom", "worktrees") // beside taskloom's own

	var ours, raw time.Duration
	n := 0
	taskloom := func() {
		start := time.Now()
		w, err := m.Create(ctx, "bench", fmt.Sprintf("T%d", n), 1)
		require.NoError(b, err)
		write(b, w.Path, fmt.Sprintf("new/ours%d.go", n), "package new\n")
		write(b, w.Path, "pkg07/file0007.go", fmt.Sprintf("package pkg07\n\nconst Ours = %d\n", n))
		_, _, err = m.Commit(ctx, w, "task")
		require.NoError(b, err)
		_, err = m.Integrate(ctx, w)
		require.NoError(b, err)
		ours += time.Since(start)
		b.StopTimer()
		require.NoError(b, m.Remove(ctx, w))
		b.StartTimer()
	}
	plain := func() {
		start := time.Now()
		path := filepath.Join(rawDir, fmt.Sprintf("raw-%d", n))
		branch := fmt.Sprintf("raw/%d", n)
		gitT(b, repo, "worktree", "add", "-q", "-b", branch, path, "main")
		write(b, path, fmt.Sprintf("new/raw%d.go", n), "package new\n")
		write(b, path, "pkg08/file0008.go", fmt.Sprintf("package pkg08\n\nconst Raw = %d\n", n))
		gitT(b, path, "add", "-A")
		gitT(b, path, "commit", "-q", "-m", "task")
		gitT(b, repo, "merge", "-q", "--ff-only", branch)
		raw += time.Since(start)
		b.StopTimer()
		gitT(b, repo, "worktree", "remove", "--force", path)
		gitT(b, repo, "branch", "-q", "-D", branch)
		b.StartTimer()
	}
	// One untimed round of each warms the caches.
	n = -1
	taskloom()
	plain()
	n, ours, raw = 0, 0, 0
	for b.Loop() {
		n++
		if n%2 == 0 {
			taskloom()
			plain()
		} else {
			plain()
			taskloom()
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) }
	b.ReportMetric(per(ours), "ms/task")
	b.ReportMetric(per(raw), "git_ms/task")
	b.ReportMetric(float64(ours)/float64(raw), "ratio_vs_git")
}
