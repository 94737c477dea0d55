//go:build linux

package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestChildDiesWithTaskloom: a command started through Run does not
// outlive the taskloom process that started it, even one killed with
// SIGKILL, which runs no cleanup.
func TestChildDiesWithTaskloom(t *testing.T) {
	if os.Getenv("TASKLOOM_PROC_DEATHSIG_PARENT") == "1" {
		// The parent: start a long sleep, say its pid, and wait.
		_, _ = Run(context.Background(), Cmd{Args: []string{"sh", "-c", "echo $$; exec sleep 60"}, OnLine: func(l string) {
			fmt.Println("child", strings.TrimSpace(l))
		}})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChildDiesWithTaskloom$")
	cmd.Env = append(os.Environ(), "TASKLOOM_PROC_DEATHSIG_PARENT=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var line string
	buf := make([]byte, 256)
	for !strings.Contains(line, "\n") {
		n, err := out.Read(buf)
		require.NoError(t, err, "the parent said nothing: %q", line)
		line += string(buf[:n])
	}
	f := strings.Fields(line)
	require.Len(t, f, 2, line)
	pid, err := strconv.Atoi(f[1])
	require.NoError(t, err, line)
	require.NoError(t, syscall.Kill(pid, 0), "the child runs")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 5*time.Second, 20*time.Millisecond,
		"the child %d outlived its killed parent", pid)
}

// TestOutliveFinishesAfterTaskloomDies: a command marked Outlive (git
// moving the user's checkout) runs to its end when taskloom is killed
// while it runs, and when ctx ends.
func TestOutliveFinishesAfterTaskloomDies(t *testing.T) {
	if dir := os.Getenv("TASKLOOM_PROC_OUTLIVE_PARENT"); dir != "" {
		// It writes output after its parent is gone, as git's progress
		// does: with pipes, it would die of SIGPIPE there.
		_, _ = Run(context.Background(), Cmd{Args: []string{"sh", "-c", "touch " + dir + "/started; sleep 0.5; echo progress >&2; echo more; echo done > " + dir + "/done"}, Outlive: true})
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOutliveFinishesAfterTaskloomDies$")
	cmd.Env = append(os.Environ(), "TASKLOOM_PROC_OUTLIVE_PARENT="+dir)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { _, err := os.Stat(dir + "/started"); return err == nil }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool { _, err := os.Stat(dir + "/done"); return err == nil }, 5*time.Second, 20*time.Millisecond,
		"the command was cut short with its parent")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var lines []string
	res, err := Run(ctx, Cmd{Args: []string{"sh", "-c", "sleep 0.3; echo finished; echo warned >&2"}, Outlive: true, Timeout: time.Minute,
		OnLine: func(l string) { lines = append(lines, l) }})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, "finished\n", res.Stdout)
	require.Equal(t, "warned\n", res.Stderr)
	require.Len(t, lines, 2)
	// Its Timeout still bounds it.
	res, err = Run(context.Background(), Cmd{Args: []string{"sleep", "5"}, Outlive: true, Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
}
