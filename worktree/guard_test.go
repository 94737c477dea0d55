package worktree_test

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/worktree"
)

// TestGuardPutsBackWhatAWorkerChanged plays hostile workers in an attempt's
// worktree, with git commands as a worker would run them, and checks that
// Restore names each change and puts it back.
func TestGuardPutsBackWhatAWorkerChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name   string
		script string
		want   []string
	}{
		{"update-ref main backwards", "env git update-ref refs/heads/main HEAD~1",
			[]string{"refs/heads/main was moved"}},
		{"branch -f through sh -c", "sh -c 'git branch -f feature HEAD~1'", []string{"refs/heads/feature was moved"}},
		{"push into the user's repo", "git -C . push -q --receive-pack='git -c receive.denyCurrentBranch=ignore receive-pack' \"$(git rev-parse --git-common-dir)/..\" HEAD~1:main --force",
			[]string{"refs/heads/main was moved"}},
		{"absolute git path and a tag", "$(command -v git) tag -f v1 HEAD && $(command -v git) tag new HEAD",
			[]string{"refs/tags/v1 was moved", "refs/tags/new was created"}},
		{"delete another branch", "git branch -D feature", []string{"refs/heads/feature was deleted"}},
		{"kept attempt ref", "git update-ref refs/taskloom/attempts/old/T9/1 HEAD", []string{"refs/taskloom/attempts/old/T9/1 was moved"}},
		{"config and hook", "git config --file \"$(git rev-parse --git-common-dir)/config\" core.hooksPath /tmp/evil; printf '#!/bin/sh\\necho pwned\\n' > \"$(git rev-parse --git-common-dir)/hooks/post-commit\"",
			[]string{"the repository's config was changed", "hook post-commit was created"}},
		// The worktree's own HEAD and commondir: taskloom's commit of the
		// attempt would move main, or be lost in another repository.
		{"HEAD onto main", "git symbolic-ref HEAD refs/heads/main", []string{"the worktree's HEAD was moved off its branch taskloom/r1/T1/1 to refs/heads/main"}},
		{"detached HEAD", "git checkout -q --detach", []string{"the worktree's HEAD was moved off its branch taskloom/r1/T1/1 to a detached commit"}},
		{"commondir elsewhere", "git init -q --bare ../elsewhere.git && echo \"$(cd ../elsewhere.git && pwd)\" > \"$(git rev-parse --git-dir)/commondir\"",
			[]string{"the worktree's commondir was pointed at", "elsewhere.git"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
			gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "second")
			gitT(t, repo, "branch", "feature")
			gitT(t, repo, "tag", "v1", "HEAD~1")
			gitT(t, repo, "update-ref", "refs/taskloom/attempts/old/T9/1", "HEAD~1")
			m := open(t, repo, nil)
			before := refs(t, repo)
			config := read(t, repo, ".git/config")
			w, err := m.Create(ctx, "r1", "T1", 1)
			require.NoError(t, err)
			before = refs(t, repo) // with the attempt's own branch
			g, err := m.Guard(ctx, w)
			require.NoError(t, err)

			playWorker(t, w.Path, tc.script)

			err = m.Restore(ctx, g)
			var te *worktree.TamperError
			require.ErrorAs(t, err, &te)
			require.ErrorIs(t, err, worktree.ErrTampered)
			for _, want := range tc.want {
				require.Contains(t, err.Error(), want)
			}
			after := refs(t, repo)
			delete(after, "refs/heads/"+w.Branch)
			delete(before, "refs/heads/"+w.Branch)
			// What was put back is kept, in case the user, not the
			// worker, made it: nothing the user did is lost.
			displaced := maps.Clone(after)
			maps.DeleteFunc(displaced, func(name, _ string) bool { return !strings.HasPrefix(name, "refs/taskloom/displaced/r1/T1/1/") })
			maps.DeleteFunc(after, func(name, _ string) bool { return strings.HasPrefix(name, "refs/taskloom/displaced/") })
			require.Equal(t, before, after)
			if slices.ContainsFunc(tc.want, func(w string) bool {
				return strings.HasPrefix(w, "refs/") && !strings.HasSuffix(w, "was deleted")
			}) {
				require.NotEmpty(t, displaced)
				require.Contains(t, err.Error(), "kept under refs/taskloom/displaced/r1/T1/1/")
				for name := range displaced {
					ref := strings.TrimPrefix(name, "refs/taskloom/displaced/r1/T1/1/")
					require.Contains(t, err.Error(), ref, "the displaced ref is one that was put back")
				}
			}
			require.Equal(t, config, read(t, repo, ".git/config"))
			require.NoFileExists(t, filepath.Join(repo, ".git", "hooks", "post-commit"))
			require.Equal(t, "refs/heads/"+w.Branch, gitT(t, w.Path, "symbolic-ref", "HEAD"), "the worktree is on its branch again")
			require.Equal(t, filepath.Join(repo, ".git"), gitT(t, w.Path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
		})
	}
}

func TestGuardAllowsTheAttemptsOwnBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)
	w, g := guardedAttempt(t, m, "T1")
	write(t, w.Path, "b.txt", "b\n")
	gitT(t, w.Path, "add", "b.txt")
	gitT(t, w.Path, "commit", "-q", "-m", "worker commit")
	require.NoError(t, m.Restore(ctx, g))
}

func TestGuardFindsABrokenWorktree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)

	w, g := guardedAttempt(t, m, "T1")
	require.NoError(t, os.RemoveAll(filepath.Join(w.Path, ".git")))
	require.ErrorIs(t, m.Restore(ctx, g), worktree.ErrBroken)

	w2, g2 := guardedAttempt(t, m, "T2")
	require.NoError(t, os.RemoveAll(w2.Path))
	require.ErrorIs(t, m.Restore(ctx, g2), worktree.ErrNotFound)
}

// TestConfineSandboxesAWorker runs hostile commands confined to an
// attempt's worktree: writes outside it, to the main checkout, to the
// repository's config and to $HOME fail; a deleted .git does not let git
// reach the user's repository; secrets are not in the environment.
func TestConfineSandboxesAWorker(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || proc.Probe().Landlock == 0 {
		t.Skip("writes are confined only on Linux with Landlock")
	}
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)
	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	home := t.TempDir()
	environ := append(testkit.GitEnv(), "HOME="+home, "AWS_SECRET_ACCESS_KEY=aws-secret-value-123")
	cf, err := m.Confine(w.Path, worktree.ConfineOpts{EnvAllow: []string{"PATH", "HOME"}, Environ: environ})
	require.NoError(t, err)
	run := func(script string) proc.Result {
		res, err := proc.Run(ctx, cf.Apply(proc.Cmd{Args: []string{"sh", "-c", script}, Dir: w.Path}))
		require.NoError(t, err)
		return res
	}
	res := run(`echo ok > new.txt; git add new.txt && git -c user.name=w -c user.email=w@x commit -q -m work && echo committed;
echo x > ../../../pwned; echo x > ` + repo + `/a.txt; echo x > "$HOME/pwned"; echo x > "$TMPDIR/fine";
git config core.hooksPath /tmp/evil; printenv; echo done`)
	require.Contains(t, res.Stdout, "committed")
	require.Contains(t, res.Stdout, "done")
	require.NotContains(t, res.Output, "aws-secret-value-123")
	require.NotContains(t, res.Stdout, "AWS_SECRET_ACCESS_KEY")
	require.NotContains(t, res.Output, "maintenance.lock", "git commits without a housekeeping warning")
	require.NoFileExists(t, filepath.Join(repo, "pwned"))
	require.NoFileExists(t, filepath.Join(home, "pwned"))
	require.Equal(t, "a\n", read(t, repo, "a.txt"))
	require.NotContains(t, read(t, repo, ".git/config"), "evil")
	require.FileExists(t, filepath.Join(cf.TempDir, "fine"))

	// The history's objects, packed and loose, cannot be deleted, moved
	// or truncated: the worker's commit above stays readable too.
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "loose")
	gitT(t, repo, "gc", "-q")
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "a loose commit after the pack")
	res = run(`o=$(git rev-parse --git-common-dir)/objects; rm -rf "$o"/pack 2>&1; rm -f "$o"/pack/* "$o"/??/* 2>&1;
for f in "$o"/pack/*.pack; do mv "$f" "$f.x" 2>&1; chmod u+w "$f"; truncate -s 0 "$f" 2>&1; done; find "$o" -type f | wc -l; echo end`)
	require.Contains(t, res.Stdout, "end")
	require.Contains(t, res.Stdout, "Permission denied")
	require.Empty(t, gitT(t, repo, "fsck", "--no-dangling", "--no-progress"), "the history is whole")
	require.Equal(t, "work", gitT(t, repo, "log", "-1", "--format=%s", w.Branch))

	// Without its .git, git in the worktree must not find the user's repo.
	require.NoError(t, os.Remove(filepath.Join(w.Path, ".git")))
	res = run("git status 2>&1; git add -A 2>&1; echo end")
	require.True(t, strings.Contains(res.Stdout, "not a git repository"), res.Stdout)
	require.Empty(t, gitT(t, repo, "status", "--porcelain", "--untracked-files=no"))
}

// guardedAttempt creates attempt 1 of task in run r1 and guards it.
// playWorker runs script in sh in dir, as a worker would, with git's test
// environment and env.
func playWorker(t *testing.T, dir, script string, env ...string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Env = dir, append(testkit.GitEnv(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func guardedAttempt(t *testing.T, m *worktree.Manager, task string) (*worktree.Worktree, *worktree.Guard) {
	t.Helper()
	w, err := m.Create(context.Background(), "r1", task, 1)
	require.NoError(t, err)
	g, err := m.Guard(context.Background(), w)
	require.NoError(t, err)
	return w, g
}

func refs(t *testing.T, repo string) map[string]string {
	t.Helper()
	out := gitT(t, repo, "for-each-ref", "--format=%(refname) %(objectname)")
	m := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			m[k] = v
		}
	}
	return m
}

// TestConfinedRefs: in the sandbox a worker can commit on its own branch
// but move no other ref; a ref that moves during the attempt is then the
// user's doing, and Restore leaves it alone.
func TestConfinedRefs(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || proc.Probe().Landlock == 0 {
		t.Skip("refs are confined only on Linux with Landlock")
	}
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "the user's second commit")
	m := open(t, repo, &worktree.Opts{ConfinedRefs: true})
	w, g := guardedAttempt(t, m, "T1")
	base := gitT(t, repo, "rev-parse", "main")
	cf, err := m.Confine(w.Path, worktree.ConfineOpts{EnvAllow: []string{"PATH", "HOME"}, Environ: testkit.GitEnv()})
	require.NoError(t, err)
	res, err := proc.Run(ctx, cf.Apply(proc.Cmd{Dir: w.Path, Args: []string{"sh", "-c",
		`echo b > b.txt && git add b.txt && git -c user.name=w -c user.email=w@x commit -q -m work && echo committed;
git update-ref refs/heads/main HEAD~1 2>&1; git tag evil 2>&1; echo end`}}))
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "committed")
	require.Contains(t, res.Stdout, "end")
	main := gitT(t, repo, "rev-parse", "main")
	require.Equal(t, base, main, "main did not move")
	require.Empty(t, gitT(t, repo, "tag", "--list", "evil"))

	// Meanwhile the user resets main, sets their name, adds a hook and
	// checks out a branch of their own: not the worker's doing (the
	// sandbox kept it out), not undone.
	gitT(t, repo, "reset", "-q", "--hard", "HEAD~1")
	gitT(t, repo, "config", "user.name", "Changed Name")
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\n"), 0o755))
	gitT(t, repo, "checkout", "-q", "-b", "feature")
	require.NoError(t, m.Restore(ctx, g))
	require.Equal(t, gitT(t, repo, "rev-parse", "HEAD"), gitT(t, repo, "rev-parse", "main"))
	require.NotEqual(t, main, gitT(t, repo, "rev-parse", "main"))
	require.Equal(t, "Changed Name", gitT(t, repo, "config", "user.name"))
	require.FileExists(t, filepath.Join(repo, ".git", "hooks", "pre-commit"))
	require.Equal(t, "refs/heads/feature", gitT(t, repo, "symbolic-ref", "HEAD"))
}

// A worker killed mid-rebase leaves its worktree's HEAD detached: Repair
// puts it back before the resumed attempt's guard, which then finds
// nothing to blame on it.
func TestRepairAfterAWorkerDiedMidRebase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)
	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	write(t, w.Path, "b.txt", "b\n")
	gitT(t, w.Path, "add", "b.txt")
	gitT(t, w.Path, "commit", "-q", "-m", "work")
	gitT(t, w.Path, "checkout", "-q", "--detach", "HEAD~1")
	gitDir := gitT(t, w.Path, "rev-parse", "--absolute-git-dir")
	require.NoError(t, os.MkdirAll(filepath.Join(gitDir, "rebase-merge"), 0o755))

	fixed, err := m.Repair(w)
	require.NoError(t, err)
	require.Len(t, fixed, 2, "%v", fixed)
	require.Equal(t, "refs/heads/"+w.Branch, gitT(t, w.Path, "symbolic-ref", "HEAD"))
	require.NoDirExists(t, filepath.Join(gitDir, "rebase-merge"))
	g, err := m.Guard(ctx, w)
	require.NoError(t, err)
	require.NoError(t, m.Restore(ctx, g))
}

// TestGuardMendsThePacks plays workers that write into the object store's
// packs, which the sandbox cannot stop (it governs neither writes into a
// file that is there nor modes): an append is cut back, a mode put back,
// an index written over rebuilt from its pack; a pack written over stops
// the attempt with ErrObjectsDamaged. Git's own freshening of a pack, and
// the worker's commits, are no change.
func TestGuardMendsThePacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		script  string
		want    string
		damaged bool
	}{
		{"commit and freshen", "echo b > b.txt && git add b.txt && git commit -qm b && touch -m \"$P\".pack", "", false},
		// What git or the user does to the packs meanwhile is no damage.
		{"a local clone links the packs", "git clone -q \"$(git rev-parse --git-common-dir)\" ../copy", "", false},
		{"a repack writes the same pack", "git -C \"$(git rev-parse --git-common-dir)\" repack -q -a -d -b", "", false},
		{"a shared repository's modes", "chmod -R g+w \"$(git rev-parse --git-common-dir)\"/objects/pack", "", false},
		{"append to the pack", "echo garbage >> \"$P\".pack", "was appended to (cut back)", false},
		{"mode of the index", "chmod 000 \"$P\".idx", "was made unreadable (mode ----------; put back)", false},
		{"index written over", "printf XXXXXXXX | dd of=\"$P\".idx bs=1 seek=1100 conv=notrunc 2>/dev/null", ".idx was written over (rebuilt from its pack)", false},
		{"pack written over", "printf XXXXXXXXXXXXXXXXXXXX | dd of=\"$P\".pack bs=1 seek=12 conv=notrunc 2>/dev/null", "was written over", true},
		// An object planted under the name of content not written yet:
		// git would take it for that content ever after.
		{"garbage planted as an object", plant + "echo garbage > \"$o/$(echo $h | cut -c3-)\"", "was written with content that is not the object its name says (removed)", false},
		// Objects of the worker's making, read through alternates, would
		// need no name in objects/ at all.
		{"alternates planted", plant + "mkdir -p \"$o/../evil/$(echo $h | cut -c1-2)\" && echo garbage > \"$o/../evil/$(echo $h | cut -c1-2)/$(echo $h | cut -c3-)\" && echo \"$o/../evil\" >> \"$o/../info/alternates\"",
			".git/objects/info/alternates was created", false},
		{"another object planted", plant + "cp \"$o/../$(echo $x | cut -c1-2)/$(echo $x | cut -c3-)\" \"$o/$(echo $h | cut -c3-)\"", "is not the object its name says (removed)", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
			gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "second")
			gitT(t, repo, "gc", "-q")
			packs, err := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "*.pack"))
			require.NoError(t, err)
			require.Len(t, packs, 1)
			m := open(t, repo, nil)
			w, g := guardedAttempt(t, m, "T1")

			playWorker(t, w.Path, tc.script, "P="+strings.TrimSuffix(packs[0], ".pack"))

			err = m.Restore(ctx, g)
			switch {
			case tc.damaged:
				require.ErrorIs(t, err, worktree.ErrObjectsDamaged)
				require.Contains(t, err.Error(), tc.want)
				return
			case tc.want == "":
				require.NoError(t, err)
			default:
				require.ErrorIs(t, err, worktree.ErrTampered)
				require.Contains(t, err.Error(), tc.want)
			}
			gitT(t, repo, "fsck", "--strict")
			require.Equal(t, "second", gitT(t, repo, "log", "-1", "--format=%s", "main"))
			// The content the plant waited for is written whole.
			testkit.WriteFiles(t, repo, map[string]string{"p.txt": "planted\n"})
			gitT(t, repo, "add", "p.txt")
			gitT(t, repo, "commit", "-qm", "p")
			gitT(t, repo, "fsck", "--strict")
		})
	}
}

// plant starts a worker's script that plants a loose object: $h is the
// name "planted\n" will have, $o its folder, and $x an object written
// meanwhile with other content.
const plant = `h=$(echo planted | git hash-object --stdin) && x=$(echo other | git hash-object -w --stdin) && ` +
	`o="$(git rev-parse --git-common-dir)/objects/$(echo $h | cut -c1-2)" && mkdir -p "$o" && `
