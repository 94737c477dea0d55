// Package mcpclient connects the coding agent to the MCP servers a run is
// configured with, using the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// A Client serves every worker of one process. Each server is started on
// first use (a stdio server through internal/proc, outside the worker
// sandbox, with the allowlisted environment plus its own env; a
// streamable-HTTP server by connecting to its URL), its tools and
// resources are listed once, and the session is shared. A server that
// exits is started again on the next use. Every step is bounded: starting
// and initializing by StartTimeout, each call by CallTimeout, so a broken
// server gives an error naming it instead of a hang. A server that could
// not start is not tried again for RetryAfter, so that every call to it
// fails at once while the run goes on.
//
// Tool arguments are validated against the tool's input schema (with
// github.com/google/jsonschema-go, which the SDK uses) before the call;
// tools whose schema does not resolve are left out, with a warning.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/internal/proc"
)

// Server is one configured MCP server: stdio when Command is set, else
// streamable HTTP at URL.
type Server struct {
	Name string
	// Command is the program and its arguments.
	Command []string
	// Env is added to the allowlisted environment, names as written.
	Env map[string]string
	URL string
}

// Opts configures a Client. Zero fields mean the defaults given.
type Opts struct {
	Servers []Server
	// Dir is the folder stdio servers start in, and against which a
	// relative command path ("./tools/server") is found: the repo's, for
	// the servers of its config. "" means this process's.
	Dir string
	// EnvAllow is what a stdio server keeps of Environ (sandbox.env_allow);
	// nil means proc.DefaultEnvAllow.
	EnvAllow []string
	// Environ is the environment EnvAllow picks from; nil means this
	// process's.
	Environ []string
	// StartTimeout bounds starting a server, its initialize handshake and
	// the listing of its tools and resources; default 30s.
	StartTimeout time.Duration
	// CallTimeout bounds one tool call or resource read; default 2m.
	CallTimeout time.Duration
	// RetryAfter is how long a server that failed to start is left alone
	// before it is tried again; default 30s.
	RetryAfter time.Duration
	// HTTPClient talks to streamable-HTTP servers; nil means a default one.
	HTTPClient *http.Client
	// WarnFunc is told, once per failure, that a server is unavailable
	// and why, in one line naming it; calls do not overlap. nil tells
	// nobody.
	WarnFunc func(msg string)
	Logger   *slog.Logger
}

// Client is the MCP servers of one process. It is safe for concurrent use
// and implements agent.MCP.
type Client struct {
	opts    Opts
	ctx     context.Context // the servers' lifetime
	cancel  context.CancelFunc
	servers []*server
	sdk     *mcp.Client
	warnMu  sync.Mutex // servers start in parallel; WarnFunc hears one at a time
}

func (c *Client) warn(msg string) {
	if c.opts.WarnFunc == nil {
		return
	}
	c.warnMu.Lock()
	defer c.warnMu.Unlock()
	c.opts.WarnFunc(msg)
}

var _ agent.MCP = (*Client)(nil)

// New returns a Client for the servers; none is started yet.
func New(opts Opts) *Client {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Minute
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 30 * time.Second
	}
	if opts.EnvAllow == nil {
		opts.EnvAllow = proc.DefaultEnvAllow
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{opts: opts, ctx: ctx, cancel: cancel,
		sdk: mcp.NewClient(&mcp.Implementation{Name: "taskloom", Version: "1"}, &mcp.ClientOptions{Logger: opts.Logger})}
	for _, s := range opts.Servers {
		// What a server returns may hold a secret: one it was given in
		// its env, or one of this process's that it read (a .env file).
		values := config.URLSecrets(s.URL)
		for _, v := range s.Env {
			values = append(values, v)
		}
		c.servers = append(c.servers, &server{cfg: s, c: c, redactor: proc.NewRedactor(c.opts.Environ, c.opts.EnvAllow, values...)})
	}
	return c
}

// Close stops every server. A nil Client has none.
func (c *Client) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, s := range c.servers {
		errs = append(errs, s.close())
	}
	c.cancel()
	return errors.Join(errs...)
}

// Servers starts the servers not yet running, in parallel, and returns
// each with its tools and resources or its error.
func (c *Client) Servers(ctx context.Context) []agent.MCPServer {
	out := make([]agent.MCPServer, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() {
			out[i] = agent.MCPServer{Name: s.cfg.Name}
			st, err := s.session(ctx)
			if err != nil {
				out[i].Err = err
				return
			}
			out[i].Tools, out[i].Resources = st.toolList, st.resources
		})
	}
	wg.Wait()
	return out
}

// CallTool validates args against the tool's input schema and calls it.
func (c *Client) CallTool(ctx context.Context, serverName, tool string, args map[string]any) (agent.MCPResult, error) {
	s, st, err := c.connected(ctx, serverName)
	if err != nil {
		return agent.MCPResult{}, err
	}
	t, ok := st.tools[tool]
	if !ok {
		return agent.MCPResult{}, fmt.Errorf("MCP server %q has no tool %q (tools: %s)", s.cfg.Name, tool, strings.Join(toolNames(st.toolList), ", "))
	}
	if args == nil {
		args = map[string]any{}
	}
	plain, err := plainJSON(args)
	if err != nil {
		return agent.MCPResult{}, fmt.Errorf("arguments of %s/%s: %w", s.cfg.Name, tool, err)
	}
	if err := t.schema.Validate(plain); err != nil {
		return agent.MCPResult{}, fmt.Errorf("arguments of %s/%s do not match its input schema: %v", s.cfg.Name, tool, err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	res, err := st.sess.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: plain})
	if err != nil {
		return agent.MCPResult{}, s.redacted(s.callError(ctx, cctx, st, tool, err))
	}
	text := contentText(res.Content)
	if text == "" && res.StructuredContent != nil {
		if data, err := json.Marshal(res.StructuredContent); err == nil {
			text = string(data)
		}
	}
	return agent.MCPResult{Text: s.redactor.Redact(text), IsError: res.IsError}, nil
}

// ReadResource reads a resource of a server.
func (c *Client) ReadResource(ctx context.Context, serverName, uri string) (agent.MCPResult, error) {
	s, st, err := c.connected(ctx, serverName)
	if err != nil {
		return agent.MCPResult{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	res, err := st.sess.ReadResource(cctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return agent.MCPResult{}, s.redacted(s.callError(ctx, cctx, st, "resources/read "+uri, err))
	}
	var parts []string
	for _, rc := range res.Contents {
		parts = append(parts, resourceText(rc))
	}
	return agent.MCPResult{Text: s.redactor.Redact(strings.Join(parts, "\n"))}, nil
}

// redacted is err with the secrets the server could know taken out of
// its message.
func (s *server) redacted(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: s.redactor.Redact(err.Error()), err: err}
}

// unavailable is the error of a call whose server is down, crashed or
// did not answer: agent.ErrMCPUnavailable, worded as msg.
func unavailable(msg string) error { return unavailableError(msg) }

type unavailableError string

func (e unavailableError) Error() string        { return string(e) }
func (e unavailableError) Is(target error) bool { return target == agent.ErrMCPUnavailable }

// redactedError is an error whose message had secrets taken out; it still
// unwraps to the error it words.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// connected returns the server named name and its session, started if
// it was not yet.
func (c *Client) connected(ctx context.Context, name string) (*server, *state, error) {
	s, err := c.server(name)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.session(ctx)
	return s, st, err
}

func (c *Client) server(name string) (*server, error) {
	for _, s := range c.servers {
		if s.cfg.Name == name {
			return s, nil
		}
	}
	names := make([]string, 0, len(c.servers))
	for _, s := range c.servers {
		names = append(names, s.cfg.Name)
	}
	return nil, fmt.Errorf("no MCP server named %q (servers: %s)", name, strings.Join(names, ", "))
}

func toolNames(tools []agent.MCPTool) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// plainJSON turns the model's arguments (which may hold json.Number) into
// the plain JSON values the schema validator and the wire expect.
func plainJSON(args map[string]any) (map[string]any, error) {
	data, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// contentText renders a result's content for the model: text as it is,
// the rest as notes that say what it was.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		switch v := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, v.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes, not shown]", orUnknown(v.MIMEType), len(v.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not shown]", orUnknown(v.MIMEType), len(v.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s (%s); read it with access_mcp_resource]", v.URI, v.Name))
		case *mcp.EmbeddedResource:
			if v.Resource != nil {
				parts = append(parts, resourceText(v.Resource))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content, not shown]", c))
		}
	}
	return strings.Join(parts, "\n")
}

// resourceText renders one resource's contents: its URI, then its text,
// or a note of its type and size when it is binary.
func resourceText(rc *mcp.ResourceContents) string {
	if rc.Blob != nil && rc.Text == "" {
		return fmt.Sprintf("[resource %s: %s, %d bytes of binary data, not shown]", rc.URI, orUnknown(rc.MIMEType), len(rc.Blob))
	}
	return fmt.Sprintf("[resource %s]\n%s", rc.URI, rc.Text)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// tool is a listed tool with its resolved input schema.
type tool struct {
	schema *jsonschema.Resolved
}

// state is one live session of a server, with what it offers.
type state struct {
	sess      *mcp.ClientSession
	cmd       *exec.Cmd     // a stdio server's process, nil for HTTP
	done      chan struct{} // closed when the session ends
	broken    atomic.Bool   // a call saw the connection end
	tools     map[string]tool
	toolList  []agent.MCPTool
	resources []agent.MCPResource
}

// close ends the session and, for a stdio server, kills what is left of
// its process group.
func (st *state) close() error {
	ended := false
	select {
	case <-st.done:
		ended = true // its group went when it ended
	default:
	}
	err := st.sess.Close()
	if !ended {
		proc.KillGroup(st.cmd)
	}
	return err
}

func (st *state) alive() bool {
	if st.broken.Load() {
		return false
	}
	select {
	case <-st.done:
		return false
	default:
		return true
	}
}

// server is one configured server and its current session.
type server struct {
	cfg      Server
	c        *Client
	redactor *proc.Redactor

	mu       sync.Mutex
	st       *state
	err      error // the last start's failure
	failedAt time.Time
	fails    int  // failures to start in a row
	warned   bool // its failure to start was told, and it has not started since
	stderr   tail
}

// session returns the server's live session, starting it when it has none
// or the last one ended. A server that failed to start within RetryAfter
// returns that failure again at once.
func (s *server) session(ctx context.Context) (*state, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st != nil && s.st.alive() {
		return s.st, nil
	}
	restart := s.st != nil
	if s.st != nil {
		s.st.close()
		s.st = nil
	}
	if s.err != nil && time.Since(s.failedAt) < s.retryAfter() {
		return nil, s.err
	}
	if restart {
		s.c.opts.Logger.WarnContext(ctx, "MCP server stopped; starting it again", slog.String("server", s.cfg.Name))
	}
	st, err := s.start(ctx)
	if err != nil && ctx.Err() != nil {
		// Stopped, not failed (Ctrl-C while it started): nothing to name,
		// and it is tried afresh next time.
		return nil, ctx.Err()
	}
	if err != nil {
		// The error of an HTTP server's client quotes the URL it was given,
		// a token in its query and all: it goes to the model's prompt.
		msg := config.RedactURLs(fmt.Sprintf("MCP server %q %s", s.cfg.Name, err))
		s.err, s.failedAt = unavailable(s.redactor.Redact(msg)), time.Now()
		s.fails++
		if !s.warned {
			// Named once: each later try fails the calls, not the log.
			s.c.warn(s.err.Error())
			s.warned = true
		}
		return nil, s.err
	}
	s.st, s.err, s.warned, s.fails = st, nil, false, 0
	return st, nil
}

// retryAfter is how long a server that failed to start is left alone:
// RetryAfter, doubled with each failure in a row up to 16 times as long,
// so that a server that hangs at start does not cost every attempt the
// start timeout again.
func (s *server) retryAfter() time.Duration {
	return s.c.opts.RetryAfter << min(max(s.fails-1, 0), 4)
}

// start connects to the server and lists its tools and resources, within
// StartTimeout.
func (s *server) start(ctx context.Context) (_ *state, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.c.opts.StartTimeout)
	defer cancel()
	s.stderr.reset()
	var t mcp.Transport
	var cmd *exec.Cmd
	defer func() {
		if err != nil {
			// What the server started (a wrapper's child) goes with it.
			proc.KillGroup(cmd)
		}
	}()
	what := "at " + s.cfg.URL
	if len(s.cfg.Command) > 0 {
		what = "(" + strings.Join(s.cfg.Command, " ") + ")"
		env := make([]string, 0, len(s.cfg.Env))
		for name, v := range s.cfg.Env {
			env = append(env, name+"="+v)
		}
		slices.Sort(env)
		// The server lives as long as the client, not as the call that
		// started it.
		args := slices.Clone(s.cfg.Command)
		if d := s.c.opts.Dir; d != "" && !filepath.IsAbs(args[0]) && strings.ContainsRune(args[0], '/') {
			args[0] = filepath.Join(d, args[0])
		}
		cmd, err = proc.ServerCommand(s.c.ctx, proc.Cmd{
			Args:     args,
			Dir:      s.c.opts.Dir,
			Env:      proc.ReduceEnv(s.c.opts.Environ, s.c.opts.EnvAllow, env...),
			OnLine:   s.stderr.add,
			Redactor: proc.NewRedactor(s.c.opts.Environ, s.c.opts.EnvAllow),
		})
		if err != nil {
			return nil, fmt.Errorf("%s could not start: %v", what, err)
		}
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.c.opts.HTTPClient, MaxRetries: -1}
	}
	sess, err := s.c.sdk.Connect(ctx, t, nil)
	if err != nil {
		return nil, s.startError(ctx, what, "initialize", err)
	}
	st := &state{sess: sess, cmd: cmd, done: make(chan struct{}), tools: map[string]tool{}}
	go func() {
		_ = sess.Wait()
		// A server that died is a zombie until the session is closed,
		// which keeps its process group's number its own: what it left
		// running goes now, not when it is started again (by then the
		// number may be another's).
		proc.KillGroup(cmd)
		close(st.done)
	}()
	caps := sess.InitializeResult().Capabilities
	if caps == nil || caps.Tools != nil {
		for t, err := range sess.Tools(ctx, nil) {
			if err != nil {
				st.close()
				return nil, s.startError(ctx, what, "tools/list", err)
			}
			s.addTool(ctx, st, t)
		}
	}
	if caps != nil && caps.Resources != nil {
		for r, err := range sess.Resources(ctx, nil) {
			if err != nil {
				st.close()
				return nil, s.startError(ctx, what, "resources/list", err)
			}
			st.resources = append(st.resources, agent.MCPResource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
		}
	}
	return st, nil
}

// addTool validates a listed tool and adds it; one with a bad name or a
// schema that does not resolve is left out with a warning.
func (s *server) addTool(ctx context.Context, st *state, t *mcp.Tool) {
	warn := func(why string) {
		s.c.opts.Logger.WarnContext(ctx, "MCP tool left out", slog.String("server", s.cfg.Name), slog.String("tool", t.Name), slog.String("why", why))
	}
	if strings.TrimSpace(t.Name) == "" {
		warn("it has no name")
		return
	}
	if _, dup := st.tools[t.Name]; dup {
		warn("its name is listed twice")
		return
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil || string(raw) == "null" {
		raw = []byte(`{"type":"object"}`)
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		warn("its input schema is not a JSON schema: " + err.Error())
		return
	}
	if sch.Type != "" && sch.Type != "object" {
		warn("its input schema is not an object's")
		return
	}
	resolved, err := sch.Resolve(nil)
	if err != nil {
		warn("its input schema does not resolve: " + err.Error())
		return
	}
	st.tools[t.Name] = tool{schema: resolved}
	st.toolList = append(st.toolList, agent.MCPTool{Name: t.Name, Description: t.Description, InputSchema: raw})
}

// startError words a failed start in one line: the step that failed, and
// what a stdio server last said on stderr.
func (s *server) startError(ctx context.Context, what, step string, err error) error {
	msg := clip.Line(err.Error(), 0)
	if ctx.Err() != nil {
		msg = fmt.Sprintf("did not answer within %s", s.c.opts.StartTimeout)
	}
	if line := s.stderr.last(); line != "" {
		return fmt.Errorf("%s failed at %s: %s; its stderr ends: %s", what, step, msg, line)
	}
	return fmt.Errorf("%s failed at %s: %s", what, step, msg)
}

// callError words a failed call: a timeout, a server that went away
// (started again on the next use), or the server's own error.
func (s *server) callError(ctx, cctx context.Context, st *state, what string, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case cctx.Err() != nil:
		return unavailable(fmt.Sprintf("MCP server %q: %s did not answer within %s", s.cfg.Name, what, s.c.opts.CallTimeout))
	case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || !st.alive():
		st.broken.Store(true)
		msg := fmt.Sprintf("MCP server %q stopped during %s (%s); it is started again on the next call", s.cfg.Name, what, clip.Line(err.Error(), 0))
		if line := s.stderr.last(); line != "" {
			msg += "; its stderr ends: " + line
		}
		return unavailable(msg)
	}
	return fmt.Errorf("MCP server %q: %s: %s", s.cfg.Name, what, clip.Line(err.Error(), 0))
}

func (s *server) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		return nil
	}
	alive := s.st.alive()
	err := s.st.close()
	s.st = nil
	// A server that already stopped has said so when it did; one that
	// exits non-zero, or on the SIGTERM sent when it does not stop once
	// its input is closed, has stopped as asked.
	var exit *exec.ExitError
	if alive && err != nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.As(err, &exit) {
		return fmt.Errorf("close MCP server %q: %w", s.cfg.Name, err)
	}
	return nil
}

// tail keeps the last non-empty line a stdio server wrote to stderr.
type tail struct {
	mu   sync.Mutex
	line string
}

func (t *tail) add(line string) {
	if line = strings.TrimSpace(line); line == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.line = clip.Head(line, 300)
}

func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.line
}

func (t *tail) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.line = ""
}

// FromConfig returns the client of a run's mcp.servers, with stdio servers
// getting sandbox.env_allow plus their own env, and each server that
// cannot start named once on warnings; nil when no server is configured.
func FromConfig(cfg config.Config, repo string, warnings io.Writer) *Client {
	if len(cfg.MCP.Servers) == 0 {
		return nil
	}
	opts := ConfigOpts(cfg, repo)
	opts.WarnFunc = func(msg string) { fmt.Fprintf(warnings, "taskloom: warning: %s\n", msg) }
	return New(opts)
}

// ConfigOpts returns the options of a run's mcp.servers: stdio servers
// start in the repo, with sandbox.env_allow plus their own env.
func ConfigOpts(cfg config.Config, repo string) Opts {
	var servers []Server
	for _, s := range cfg.MCP.Servers {
		servers = append(servers, Server{Name: s.Name, Command: append(slices.Clone(s.Command), s.Args...), Env: s.Env, URL: s.URL})
	}
	return Opts{Servers: servers, Dir: repo, EnvAllow: cfg.Sandbox.EnvAllow}
}
