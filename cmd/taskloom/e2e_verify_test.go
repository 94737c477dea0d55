package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/llm"
)

// TestE2EBisectionFindsBothClashingTasks: a batch of four parallel tasks,
// each passing its tests alone. T1 and T3 both define Shared, so main
// does not build once both are on it. Build verification bisects over
// the batch: it finds T3, whose integration broke main, and T1, the
// earlier task it clashes with, in about log2(4) builds plus the partner
// search; it reverts T3 alone and retries it with the failure, which names
// T1. T2 and T4 stay integrated once.
func TestE2EBisectionFindsBothClashingTasks(t *testing.T) {
	longE2E(t)
	forEachStore(t, testE2EBisection)
}

func testE2EBisection(t *testing.T, db []string) {
	var product strings.Builder
	product.WriteString("# queue\n\n## Milestone M1: Greetings\n")
	var convs []llm.Conversation
	for i := 1; i <= 4; i++ {
		id, name := fmt.Sprintf("T%d", i), fmt.Sprintf("f%d", i)
		fmt.Fprintf(&product, "\n### Task %s: Greeting %d\n- user_story: As a user I want greeting %d\n- acceptance_criteria:\n  - it greets\n- files_to_create: greet/%s.go\n- priority: high\n", id, i, i, name)
		src := fmt.Sprintf("package greet\n\n// F%d greets.\nfunc F%d() string { return %q }\n", i, i, name)
		if i == 1 || i == 3 {
			// Fine alone; a duplicate beside the other.
			src += "\n// Shared is defined twice once T1 and T3 are both on main.\nfunc Shared() int { return " + fmt.Sprint(i) + " }\n"
		}
		convs = append(convs, llm.Conversation{Match: fmt.Sprintf(`Task: %s [\s\S]*Attempt: 1 of`, id), Replies: writeAndFinish("greet/"+name+".go", src)})
	}
	// T3's retry, told that it clashes with T1, drops its Shared.
	convs = append(convs, llm.Conversation{Match: `Task: T3 [\s\S]*Attempt: 2 of[\s\S]*together with T1`, Replies: writeAndFinish("greet/f3.go", "package greet\n\n// F3 greets.\nfunc F3() string { return \"f3\" }\n")})
	dir := greetRepo(t, "queue", `{"parallel_workers": 4, "max_attempts": 3, "verify": {"command": ["go", "test", "./..."]}, "build_verification": {"command": ["go", "vet", "./..."]}}`, product.String())
	sessionPath := writeSession(t, llm.Script{Conversations: convs})

	args := append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--model", "scripted:" + sessionPath}, db...)
	code, stdout, stderr := taskloom(t, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)

	id := runID(t, stdout)
	code, hist, stderr := taskloom(t, append([]string{"history", id, "--repo", dir}, db...)...)
	require.Equal(t, 0, code, stderr)
	all := stdout + "\n" + hist
	t.Logf("run:\n%s", stdout)
	require.Contains(t, all, "bisect: bisecting over 4 attempts: T1/1, T2/1, T3/1, T4/1")
	m := regexp.MustCompile(`bisection over 4 attempts took (\d+) builds: T3/1 broke main together with T1/1`).FindStringSubmatch(all)
	require.NotNil(t, m, "the bisection names both; output:\n%s", all)
	t.Logf("builds in the bisection over 4 attempts: %s (base, log2(4) = 2 to find T3, 2 to find T1)", m[1])
	builds, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.LessOrEqual(t, builds, 5)
	require.Contains(t, all, "T3 broke main; reverted it")
	require.NotContains(t, all, "T1 broke main")

	log := git(t, dir, "log", "--format=%s", "main")
	require.Contains(t, log, "Revert T3: it broke the build on main")
	tr := trailers(t, dir)
	for _, id := range []string{"T1", "T2", "T4"} {
		require.Equal(t, []string{"1"}, tr[id], "%s is integrated once and stays", id)
	}
	require.Len(t, tr["T3"], 2, "T3's first try (reverted) and its retry")
	goTestPasses(t, dir)
	noWorktreesLeft(t, dir)
}

// TestE2ETestsThatCannotRunFailTheAttempt: a verify command that cannot
// start fails each task's attempt, which escalates when out of attempts;
// the run stops for review (exit 3), not with an error.
func TestE2ETestsThatCannotRunFailTheAttempt(t *testing.T) {
	longE2E(t)
	forEachStore(t, func(t *testing.T, db []string) {
		dir := exampleRepo(t, func(c map[string]any) {
			c["max_attempts"] = 1
			c["verify"] = map[string]any{"command": []string{"taskloom-no-such-test-runner"}}
		}, nil)
		code, stdout, stderr := taskloom(t, append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)...)
		require.Equal(t, exitReview, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		require.Contains(t, stdout, "cannot run the tests")
		require.Contains(t, stdout, "escalating to a human")
	})
}
