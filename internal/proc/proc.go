package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Cmd is one subprocess.
type Cmd struct {
	// Args is the program and its arguments; the program is looked up in
	// the PATH of Env (or of this process when Env is nil).
	Args []string
	// Dir is the working directory; "" means this process's.
	Dir string
	// Env is the complete environment of the command; nil means this
	// process's own. Use ReduceEnv to build an allowlisted one.
	Env []string
	// Stdin feeds the command's standard input; nil means none.
	Stdin io.Reader
	// Timeout bounds the run; 0 means only ctx does. When it passes the
	// command and everything it started are killed and the result says
	// TimedOut.
	Timeout time.Duration
	// OutputLimit caps each of Stdout, Stderr and Output at about that
	// many bytes, keeping the head and the tail; 0 keeps everything.
	OutputLimit int
	// OnLine, when set, receives every complete line of output, in order,
	// from one goroutine at a time.
	OnLine func(line string)
	// Sandbox confines the command; nil runs it unconfined (taskloom's own
	// git commands).
	Sandbox *Policy
	// Redactor hides secret values in every line handed to OnLine and in
	// the result's output; nil hides nothing.
	Redactor *Redactor
	// Outlive lets the command run to its end when ctx ends or taskloom
	// dies (Timeout still bounds it): for a short git command that
	// changes the user's checkout, which a kill would leave half done.
	// Its output goes through files, not pipes, so that it does not die
	// writing to a pipe nobody reads (git shows progress on a long
	// checkout); the lines reach OnLine when it ends.
	Outlive bool
}

// Confinement is how the commands of one working directory run: the
// environment they get, the sandbox they run in and the secrets hidden
// from what they print.
type Confinement struct {
	Env      []string
	Sandbox  *Policy
	Redactor *Redactor
	// TempDir is the command's private temp dir (its TMPDIR), writable in
	// the sandbox; report files that taskloom reads back go there.
	TempDir string
}

// Apply sets c's environment, sandbox and redactor from the confinement.
func (cf Confinement) Apply(c Cmd) Cmd {
	c.Env, c.Sandbox, c.Redactor = cf.Env, cf.Sandbox, cf.Redactor
	return c
}

// Result is what a command did.
type Result struct {
	// ExitCode is the exit status, or -1 when the command was killed by a
	// signal or never ran.
	ExitCode int
	// Stdout and Stderr are the two streams; Output interleaves them by
	// lines. All three are capped by OutputLimit.
	Stdout, Stderr, Output string
	// TimedOut is true when Timeout passed and the command was killed.
	TimedOut bool
	Duration time.Duration
}

// ErrTimeout is the cause of a run's context when its timeout passed.
var ErrTimeout = errors.New("command timed out")

// Run runs c and waits for it. A non-zero exit and a timeout are results,
// not errors: the error is non-nil only when the command could not start
// or ctx ended (then it wraps ctx's cause).
func Run(ctx context.Context, c Cmd) (Result, error) {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return Result{ExitCode: -1}, errors.New("run: empty command")
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if c.Outlive {
		runCtx = context.WithoutCancel(ctx)
	}
	if c.Timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(runCtx, c.Timeout, ErrTimeout)
	}
	defer cancel()

	cmd, err := command(runCtx, c)
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	cmd.Dir = c.Dir
	cmd.Stdin = c.Stdin
	// A grandchild that left the group and kept our pipes open must not
	// hold Wait forever.
	cmd.WaitDelay = 3 * time.Second

	cap := &capture{both: newHeadTail(c.OutputLimit), onLine: c.OnLine, redactor: c.Redactor}
	stdout := &stream{c: cap, own: newHeadTail(c.OutputLimit)}
	stderr := &stream{c: cap, own: newHeadTail(c.OutputLimit)}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	var files *outputFiles
	if c.Outlive {
		if files, err = newOutputFiles(cmd); err != nil {
			return Result{ExitCode: -1}, fmt.Errorf("run %s: %w", c.Args[0], err)
		}
		defer files.close()
	}

	start := time.Now()
	countStart(c.Args[0])
	err = cmd.Run()
	if files != nil {
		files.copyTo(stdout, stderr)
	}
	stdout.flush()
	stderr.flush()
	res := Result{
		ExitCode: -1,
		Stdout:   c.Redactor.Redact(stdout.own.String()),
		Stderr:   c.Redactor.Redact(stderr.own.String()),
		Output:   cap.both.String(),
		Duration: time.Since(start),
	}
	if cmd.ProcessState == nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("run %s: %w", c.Args[0], context.Cause(ctx))
		}
		return res, fmt.Errorf("run %s: %w", c.Args[0], err)
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ctx.Err() != nil && !c.Outlive {
		return res, fmt.Errorf("run %s: %w", c.Args[0], context.Cause(ctx))
	}
	res.TimedOut = errors.Is(context.Cause(runCtx), ErrTimeout) && !cmd.ProcessState.Success()
	if c.Sandbox != nil && res.ExitCode == helperFailed && strings.Contains(res.Stderr, helperPrefix) {
		// The helper could not set the sandbox up: that is not the
		// command's verdict.
		return res, fmt.Errorf("run %s: %s", c.Args[0], strings.TrimSpace(lastLine(res.Stderr)))
	}
	return res, nil
}

// command builds the exec.Cmd for c: directly, or through the sandbox
// helper.
func command(ctx context.Context, c Cmd) (*exec.Cmd, error) {
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	if c.Sandbox != nil {
		return sandboxed(ctx, c, env)
	}
	path, err := lookPath(c.Args[0], env)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", c.Args[0], err)
	}
	cmd := exec.CommandContext(ctx, path, c.Args[1:]...)
	cmd.Args[0] = c.Args[0]
	cmd.Env = env
	setGroup(cmd, !c.Outlive)
	return cmd, nil
}

// outputFiles hold a command's output in unlinked temp files, which it
// writes directly, whatever becomes of taskloom.
type outputFiles struct{ stdout, stderr *os.File }

func newOutputFiles(cmd *exec.Cmd) (*outputFiles, error) {
	var f outputFiles
	for _, p := range []**os.File{&f.stdout, &f.stderr} {
		file, err := os.CreateTemp("", "taskloom-output-")
		if err != nil {
			f.close()
			return nil, err
		}
		_ = os.Remove(file.Name()) // the open files are all that is needed
		*p = file
	}
	cmd.Stdout, cmd.Stderr = f.stdout, f.stderr
	return &f, nil
}

// copyTo hands what the command wrote to the streams, once it ended.
func (f *outputFiles) copyTo(stdout, stderr io.Writer) {
	for _, p := range []struct {
		file *os.File
		w    io.Writer
	}{{f.stdout, stdout}, {f.stderr, stderr}} {
		if _, err := p.file.Seek(0, io.SeekStart); err == nil {
			_, _ = io.Copy(p.w, p.file)
		}
	}
}

func (f *outputFiles) close() {
	for _, file := range []*os.File{f.stdout, f.stderr} {
		if file != nil {
			_ = file.Close()
			// Where an open file cannot be removed (Windows), it goes now.
			_ = os.Remove(file.Name())
		}
	}
}

// lookPath finds a program in the PATH of env, as the command will.
func lookPath(name string, env []string) (string, error) {
	if strings.ContainsRune(name, os.PathSeparator) || strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return lookPathIn(name, path)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// maxLineLength bounds a line handed to OnLine; longer ones are split.
const maxLineLength = 64 << 10

// capture collects both streams of a command whole lines at a time, so
// that they interleave by lines.
type capture struct {
	mu       sync.Mutex
	both     *headTail
	onLine   func(string)
	redactor *Redactor
}

func (c *capture) line(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.redactor != nil && c.redactor.r != nil {
		b = []byte(c.redactor.Redact(string(b)))
	}
	c.both.Write(b)
	if c.onLine != nil {
		c.onLine(strings.TrimRight(string(b), "\r\n"))
	}
}

// stream is one of a command's output streams. Only exec's copying
// goroutine for that stream writes to it.
type stream struct {
	c       *capture
	own     *headTail
	partial []byte
}

func (s *stream) Write(p []byte) (int, error) {
	n := len(p)
	s.own.Write(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			if len(s.partial) >= maxLineLength {
				s.flush()
			}
			break
		}
		line := p[:i+1]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
			s.partial = s.partial[:0]
		}
		s.c.line(line)
		p = p[i+1:]
	}
	return n, nil
}

// flush hands on a last line that had no newline.
func (s *stream) flush() {
	if len(s.partial) > 0 {
		s.c.line(s.partial)
		s.partial = nil
	}
}

// headTail keeps the first and last limit/2 bytes written to it; a limit
// of 0 keeps everything.
type headTail struct {
	limit int
	head  []byte
	tail  []byte // ring buffer once full
	pos   int
	total int64
}

func newHeadTail(limit int) *headTail {
	if limit > 0 && limit < 64 {
		limit = 64
	}
	return &headTail{limit: limit}
}

func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	h.total += int64(n)
	if h.limit == 0 {
		h.head = append(h.head, p...)
		return n, nil
	}
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
