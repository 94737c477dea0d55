package worktree_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/worktree"
)

func Example() {
	ctx := context.Background()
	repo, err := os.MkdirTemp("", "taskloom-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(repo)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-q", "--allow-empty", "-m", "start"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = repo, testkit.GitEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			panic(fmt.Sprintf("git %v: %v: %s", args, err, out))
		}
	}
	if err := os.WriteFile(filepath.Join(repo, ".env"), []byte("TOKEN=local\n"), 0o600); err != nil {
		panic(err)
	}

	m, err := worktree.Open(ctx, repo, &worktree.Opts{Include: []string{".env"}})
	if err != nil {
		panic(err)
	}
	w, err := m.Create(ctx, "run1", "T1", 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("branch:", w.Branch)
	env, _ := os.ReadFile(filepath.Join(w.Path, ".env"))
	fmt.Printf("copied .env: %q\n", env)

	// The worker writes its files, its tests pass, then:
	if err := os.WriteFile(filepath.Join(w.Path, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		panic(err)
	}
	_, changed, err := m.Commit(ctx, w, "T1: say hello")
	if err != nil {
		panic(err)
	}
	fmt.Println("changed:", changed)
	for range 2 {
		res, err := m.Integrate(ctx, w)
		if err != nil {
			panic(err)
		}
		fmt.Println("integrate:", res.Outcome)
	}
	hello, _ := os.ReadFile(filepath.Join(repo, "hello.txt"))
	fmt.Printf("main checkout has hello.txt: %q\n", hello)
	if err := m.Remove(ctx, w); err != nil {
		panic(err)
	}
	// Output:
	// branch: taskloom/run1/T1/1
	// copied .env: "TOKEN=local\n"
	// changed: true
	// integrate: integrated
	// integrate: already_integrated
	// main checkout has hello.txt: "hello\n"
}
