package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// processResult is what runProcess observed.
type processResult struct {
	ExitCode int
	// Stdout and Stderr are truncated to their heads and tails.
	Stdout, Stderr string
	// Output interleaves both streams, truncated the same way.
	Output   string
	TimedOut bool
	Duration time.Duration
}

// runProcess runs argv in dir with env, killing its whole process group
// when timeout passes or ctx ends. A non-zero exit is not an error; only a
// failure to start, or ctx ending, is.
func runProcess(ctx context.Context, dir string, argv []string, env []string, timeout time.Duration, limit int) (processResult, error) {
	if len(argv) == 0 {
		return processResult{}, errors.New("empty command")
	}
	runCtx := ctx
	var cancel context.CancelFunc
	if timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	both := newHeadTail(limit)
	stdout := newHeadTail(limit)
	stderr := newHeadTail(limit)
	cmd.Stdout = multi{stdout, both}
	cmd.Stderr = multi{stderr, both}
	start := time.Now()
	err := cmd.Run()
	res := processResult{
		Stdout: stdout.String(), Stderr: stderr.String(), Output: both.String(),
		Duration: time.Since(start), ExitCode: -1,
	}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if runCtx.Err() != nil {
		res.TimedOut = true
		return res, nil
	}
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return res, nil
		}
		if errors.Is(err, exec.ErrWaitDelay) {
			return res, nil
		}
		return res, fmt.Errorf("run %s: %w", argv[0], err)
	}
	return res, nil
}

type multi []interface{ Write([]byte) (int, error) }

func (m multi) Write(p []byte) (int, error) {
	for _, w := range m {
		if _, err := w.Write(p); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// headTail keeps the first and last limit/2 bytes written to it. It is
// safe for concurrent writes (stdout and stderr share one).
type headTail struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // ring buffer
	pos   int
	total int64
}

func newHeadTail(limit int) *headTail {
	if limit < 64 {
		limit = 64
	}
	return &headTail{limit: limit}
}

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	half := h.limit / 2
	if room := half - len(h.head); room > 0 {
		take := min(room, len(p))
		h.head = append(h.head, p[:take]...)
		p = p[take:]
	}
	tailCap := h.limit - half
	for len(p) > 0 {
		if len(h.tail) < tailCap {
			take := min(tailCap-len(h.tail), len(p))
			h.tail = append(h.tail, p[:take]...)
			p = p[take:]
			continue
		}
		c := copy(h.tail[h.pos:], p)
		h.pos = (h.pos + c) % tailCap
		p = p[c:]
	}
	return n, nil
}

func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	tail := append(append([]byte{}, h.tail[h.pos:]...), h.tail[:h.pos]...)
	kept := int64(len(h.head) + len(tail))
	if h.total <= kept {
		return string(h.head) + string(tail)
	}
	var b bytes.Buffer
	b.Write(h.head)
	fmt.Fprintf(&b, "\n… [%d bytes omitted] …\n", h.total-kept)
	b.Write(tail)
	return b.String()
}

var secretEnv = regexp.MustCompile(`(?i)(API_KEY|APIKEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL)`)

// scrubbedEnv returns os.Environ() without variables that look like
// credentials, so that commands the model runs cannot print them into a
// history.
func scrubbedEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if secretEnv.MatchString(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
