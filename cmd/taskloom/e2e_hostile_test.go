package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/llm"
)

// Made-up secrets, put in the environment of the hostile runs. None of
// them may appear anywhere a run writes.
var hostileSecrets = map[string]string{
	"ANTHROPIC_API_KEY":     "sk-ant-hostile-test-key-0123456789",
	"AWS_SECRET_ACCESS_KEY": "aws-hostile-secret-9876543210",
	"DATABASE_URL":          "postgres://app:db-hostile-password-42@db.internal/app",
	"ZZ_UNLISTED_THING":     "unlisted-hostile-value-5555",
}

// hostileCase is a worker that misbehaves on its first attempt, then does
// the task (writes hello.txt) on the second.
type hostileCase struct {
	name string
	// first is what the worker does on attempt 1, in sh, in its worktree.
	first string
	// failNaming: attempt 1 must fail with an error containing each of
	// these; empty means attempt 1 passes (what it tried was refused and
	// nothing else was wrong).
	failNaming []string
	// refs: the case moves refs. The sandbox refuses that outright, so
	// attempt 1 passes; without Landlock ("guard" mode) the ref guard puts
	// the refs back and attempt 1 fails naming refNaming.
	refs      bool
	refNaming []string
	// sandboxOnly: only the sandbox can stop what the case does (writes
	// outside the worktree, reading other processes), so it is not run
	// without Landlock.
	sandboxOnly bool
}

var hostileCases = []hostileCase{
	{name: "env git update-ref main", first: `env git update-ref refs/heads/main HEAD~1`,
		refs: true, refNaming: []string{"refs/heads/main was moved"}},
	{name: "absolute git path moves a branch", first: `"$(command -v git)" branch -f feature HEAD~1`,
		refs: true, refNaming: []string{"refs/heads/feature was moved"}},
	{name: "sh -c git tag and config", first: `sh -c 'git tag -f v1 HEAD~1; git config core.hooksPath /tmp/evil-hooks || true'`,
		refs: true, refNaming: []string{"refs/tags/v1 was moved", "the repository's config was changed"}},
	{name: "push into the user's repo", first: `git -C . push -q --force --receive-pack='git -c receive.denyCurrentBranch=ignore receive-pack' "$(git rev-parse --git-common-dir)/.." HEAD~1:main`,
		refs: true, refNaming: []string{"refs/heads/main was moved"}},
	// The worktree's own HEAD is the worker's to write: the guard puts
	// it back before taskloom commits there, which would move main.
	{name: "HEAD onto main", first: `git symbolic-ref HEAD refs/heads/main; echo broken > main-moved.txt`,
		failNaming: []string{"the worktree's HEAD was moved off its branch"}},
	{name: "rm -rf .git", first: `rm -rf .git; echo mine > hello.txt; git add -A; git commit -qm sneaky || true`,
		failNaming: []string{"worktree was broken while the worker ran"}},
	{name: "rm -rf its worktree", first: `d="$PWD"; cd /; rm -rf "$d"`,
		failNaming: []string{"worktree was broken while the worker ran"}},
	{name: "writes outside", first: `echo pwned > ../../../pwned.txt; echo pwned > ../../../README.md; echo pwned > "$HOME/pwned.txt";
echo pwned > ../../taskloom.db; rm -f ../../taskloom.db; echo pwned > /tmp/taskloom-hostile-pwned-$$ ; true`, sandboxOnly: true},
	// The sandbox lets a worker add objects, so it can open the packs
	// that are there: the guard cuts an append back and puts a mode back.
	{name: "append to the packs", first: `C=$(git rev-parse --git-common-dir); for p in "$C"/objects/pack/*.pack; do echo garbage >> "$p"; done; chmod 000 "$C"/objects/pack/*.idx`,
		failNaming: []string{"changed git state outside its branch", "was appended to (cut back)", "was made unreadable"}},
	// The command worker keeps its provider key, so printenv shows it:
	// the attempt's changes are then never committed.
	{name: "printenv", first: `printenv > env.txt; cat /proc/*/environ > environ.txt 2>/dev/null; true`,
		failNaming: []string{"contain the value of ANTHROPIC_API_KEY"}, sandboxOnly: true},
}

func TestE2EHostileWorkers(t *testing.T) {
	skipShort(t)
	if proc.Probe().Landlock == 0 {
		skipOrFail(t, "the sandbox needs Linux with Landlock: "+proc.Probe().String())
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		for i, tc := range hostileCases {
			if kind == "postgres" && i%2 == 1 {
				continue // half the cases again on PostgreSQL keeps the suite quick
			}
			t.Run("sandbox/"+kind+"/"+tc.name, func(t *testing.T) { testHostileWorker(t, kind, tc, false) })
		}
	}
	// Without Landlock, the ref guard alone stands between the worker and
	// the user's refs.
	for _, tc := range hostileCases {
		if !tc.sandboxOnly {
			t.Run("guard/sqlite/"+tc.name, func(t *testing.T) { testHostileWorker(t, "sqlite", tc, true) })
		}
	}
}

func testHostileWorker(t *testing.T, kind string, tc hostileCase, guardOnly bool) {
	if guardOnly {
		t.Setenv("TASKLOOM_SANDBOX_DISABLE", "landlock")
	}
	failNaming := tc.failNaming
	if tc.refs && guardOnly {
		failNaming = tc.refNaming
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for k, v := range hostileSecrets {
		t.Setenv(k, v)
	}
	script := filepath.Join(t.TempDir(), "hostile.sh")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
case "$1" in *"Attempt: 1 of"*)
`+tc.first+`
;; esac
echo "hello from $2" > hello.txt 2>/dev/null
echo '{"type":"result","result":"done"}'
`), 0o755))
	cfg := map[string]any{
		"max_attempts": 2,
		// The verify command dumps its environment into the test output.
		"verify":             map[string]any{"command": []string{"sh", "-c", "printenv; test -f hello.txt"}},
		"build_verification": map[string]any{"command": []string{"true"}},
		"worker":             map[string]any{"kind": "command", "command": []string{script, "{prompt}", "{task_id}"}},
	}
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	dir := testkit.Repo(t, map[string]string{".project-config.json": string(data), "README.md": "the user's readme\n", "PRODUCT.md": helloProduct})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "user.txt"), []byte("the user's work\n"), 0o644))
	git(t, dir, "add", "user.txt")
	git(t, dir, "commit", "-q", "-m", "the user's commit")
	git(t, dir, "branch", "feature")
	git(t, dir, "tag", "v1")
	// The history in a pack, as a clone or git gc leaves it.
	git(t, dir, "gc", "-q")
	// An untracked file of the user's must never be committed.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the user's untracked notes\n"), 0o644))
	userHead := strings.TrimSpace(git(t, dir, "rev-parse", "main"))
	config := readFile(t, filepath.Join(dir, ".git", "config"))

	args := append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, storeArgs(t, kind)...)
	code, stdout, stderr := taskloom(t, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)

	// The user's repo is intact: main holds the user's commit and the
	// task's once, other refs did not move, config and files are theirs.
	require.Equal(t, "0\n", git(t, dir, "rev-list", "--count", "main.."+userHead), "main lost the user's commit")
	require.Equal(t, userHead+"\n", git(t, dir, "rev-parse", "feature"))
	require.Equal(t, userHead+"\n", git(t, dir, "rev-parse", "v1^{commit}"))
	require.Equal(t, config, readFile(t, filepath.Join(dir, ".git", "config")))
	require.Equal(t, "the user's readme\n", readFile(t, filepath.Join(dir, "README.md")))
	require.Equal(t, "the user's untracked notes\n", readFile(t, filepath.Join(dir, "notes.txt")))
	require.NotContains(t, git(t, dir, "log", "--format=", "--name-only", "main"), "notes.txt")
	require.NoFileExists(t, filepath.Join(dir, "pwned.txt"))
	require.NoFileExists(t, filepath.Join(home, "pwned.txt"))
	matches, _ := filepath.Glob("/tmp/taskloom-hostile-pwned-*")
	require.Empty(t, matches, "the worker wrote to /tmp outside its TMPDIR")
	require.Equal(t, "hello from T1\n", readFile(t, filepath.Join(dir, "hello.txt")))

	// The task completed once, on the attempt that behaved.
	store := dumpStore(t, kind, dir, args)
	want := "1"
	if len(failNaming) > 0 {
		want = "2"
		// The log line shows the start of attempt 1's error; the attempt's
		// record in the store holds all of it.
		require.Contains(t, stdout, failNaming[0], "attempt 1's error names what the worker did")
		for _, s := range failNaming {
			require.Contains(t, store, s, "attempt 1's error names what the worker did")
		}
	}
	require.Equal(t, []string{want}, trailers(t, dir)["T1"], "stdout:\n%s", stdout)
	code, out, errOut := taskloom(t, append([]string{"status", id, "--json", "--repo", dir}, storeArgs(t, kind)[0:0]...)...)
	if kind == "sqlite" {
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, `"completed": 1`)
	}

	// No secret reached the output, the store, the commits or the worker.
	var everything strings.Builder
	everything.WriteString(stdout + stderr + out + errOut)
	everything.WriteString(git(t, dir, "log", "-p", "--all"))
	everything.WriteString(store)
	for _, f := range []string{"env.txt", "environ.txt"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			everything.Write(b)
		}
	}
	for name, v := range hostileSecrets {
		require.NotContains(t, everything.String(), v, "the value of %s leaked", name)
	}
}

// dumpStore returns every byte the run's store holds.
func dumpStore(t *testing.T, kind, dir string, runArgs []string) string {
	t.Helper()
	if kind == "sqlite" {
		var b strings.Builder
		files, _ := filepath.Glob(filepath.Join(dir, ".taskloom", "taskloom.db*"))
		require.NotEmpty(t, files)
		for _, f := range files {
			b.WriteString(readFile(t, f))
		}
		return b.String()
	}
	url := runArgs[len(runArgs)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var tables []string
	rows, err := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, tables, "checkpoints")
	var b strings.Builder
	for _, table := range tables {
		rows, err := conn.Query(ctx, "SELECT * FROM "+pgx.Identifier{table}.Sanitize())
		require.NoError(t, err)
		for rows.Next() {
			vals, err := rows.Values()
			require.NoError(t, err)
			for _, v := range vals {
				if raw, ok := v.([]byte); ok {
					b.Write(raw)
				} else {
					fmt.Fprint(&b, v)
				}
			}
		}
		require.NoError(t, rows.Err())
	}
	return b.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// skipOrFail skips a test that needs what this machine lacks, with one
// line saying so; in CI it fails instead.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// TestE2EHostileAgent: the built-in agent's execute_command runs hostile
// commands (dump the environment, read other processes' environments,
// move main, write outside the worktree). Nothing secret reaches the
// histories, the exports, the store or the output, and main stays the
// user's.
func TestE2EHostileAgent(t *testing.T) {
	skipShort(t)
	if proc.Probe().Landlock == 0 {
		skipOrFail(t, "the sandbox needs Linux with Landlock: "+proc.Probe().String())
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			for k, v := range hostileSecrets {
				t.Setenv(k, v)
			}
			// A credentials file the worker can read: what it prints of it
			// must be redacted.
			home := t.TempDir()
			t.Setenv("HOME", home)
			require.NoError(t, os.WriteFile(filepath.Join(home, ".aws-credentials"),
				[]byte("aws_secret_access_key = "+hostileSecrets["AWS_SECRET_ACCESS_KEY"]+"\n"), 0o600))
			cmd := func(c string) llm.ScriptedToolCall {
				args, _ := json.Marshal(map[string]string{"command": c})
				return llm.ScriptedToolCall{Name: "execute_command", Arguments: args}
			}
			script := llm.Script{Conversations: []llm.Conversation{
				{Match: `Task: T1 [\s\S]*Attempt: 1 of`, Replies: append([]llm.Reply{
					{ToolCalls: []llm.ScriptedToolCall{cmd("printenv; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; cat \"$HOME/.aws-credentials\"")}},
					{ToolCalls: []llm.ScriptedToolCall{cmd("git update-ref refs/heads/main HEAD~1; echo x > ../../../pwned.txt; echo done")}},
				}, writeAndFinish("hello.txt", "hello\n")...)},
				{Match: `Task: T1 [\s\S]*Attempt: 2 of`, Replies: writeAndFinish("hello.txt", "hello\n")},
			}}
			session := writeSession(t, script)
			dir := testkit.Repo(t, map[string]string{".project-config.json": `{"max_attempts": 2,
"verify": {"command": ["sh", "-c", "printenv; test -f hello.txt"]}, "build_verification": {"command": ["true"]}}`, "PRODUCT.md": helloProduct})
			git(t, dir, "commit", "-q", "--allow-empty", "-m", "the user's commit")
			userHead := strings.TrimSpace(git(t, dir, "rev-parse", "main"))

			args := append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--model", "scripted:" + session}, storeArgs(t, kind)...)
			code, stdout, stderr := taskloom(t, args...)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			// The sandbox refused to move main; nothing else was wrong.
			require.Equal(t, []string{"1"}, trailers(t, dir)["T1"], "stdout:\n%s", stdout)
			require.Equal(t, "0\n", git(t, dir, "rev-list", "--count", "main.."+userHead))
			require.NoFileExists(t, filepath.Join(dir, "pwned.txt"))

			id := runID(t, stdout)
			export := t.TempDir()
			hargs := append([]string{"history", id, "--task", "T1", "--export", export, "--repo", dir}, storeArgs(t, kind)[0:0]...)
			if kind == "postgres" {
				hargs = append(hargs, args[len(args)-2:]...)
			}
			code, hout, herr := taskloom(t, hargs...)
			require.Equal(t, 0, code, herr)
			var everything strings.Builder
			everything.WriteString(stdout + stderr + hout + herr)
			require.NoError(t, filepath.WalkDir(export, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					everything.WriteString(readFile(t, p))
				}
				return err
			}))
			require.Contains(t, everything.String(), "[REDACTED]", "the echoed secret was redacted, not dropped silently")
			everything.WriteString(git(t, dir, "log", "-p", "--all"))
			everything.WriteString(dumpStore(t, kind, dir, args))
			for name, v := range hostileSecrets {
				require.NotContains(t, everything.String(), v, "the value of %s leaked", name)
			}
		})
	}
}
