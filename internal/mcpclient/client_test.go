package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/mcpclient"
)

// The test binary doubles as a stdio MCP server (see TestMain), so that
// crashes, images and the environment can be tested without npm.
const serveEnv = "TASKLOOM_TEST_MCP_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		if err := testServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text  string `json:"text" jsonschema:"the text to echo"`
	Times int    `json:"times,omitempty" jsonschema:"how many times"`
}

// testServer offers echo, env (one variable's value), picture (an image),
// crash (exits the process) and a text resource.
func testServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "taskloom-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		out := in.Text
		for range in.Times - 1 {
			out += in.Text
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Print an environment variable."}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Name string `json:"name"`
	}) (*mcp.CallToolResult, any, error) {
		v, ok := os.LookupEnv(in.Name)
		if !ok {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: in.Name + " is not set"}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "Return a picture."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "here it is"},
			&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")},
		}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the server."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(3)
		return nil, nil, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://notes/readme", Name: "readme", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "the notes"}}}, nil
	})
	return s
}

func selfServer(t *testing.T, name string, env map[string]string) mcpclient.Server {
	exe, err := os.Executable()
	require.NoError(t, err)
	if env == nil {
		env = map[string]string{}
	}
	env[serveEnv] = "1"
	return mcpclient.Server{Name: name, Command: []string{exe}, Env: env}
}

func newClient(t *testing.T, opts mcpclient.Opts) *mcpclient.Client {
	c := mcpclient.New(opts)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// requireEchoes calls server's echo tool with text and checks that the
// text comes back.
func requireEchoes(t *testing.T, c *mcpclient.Client, server, text string) {
	t.Helper()
	res, err := c.CallTool(context.Background(), server, "echo", map[string]any{"text": text})
	require.NoError(t, err)
	require.Equal(t, text, res.Text)
}

func TestStdioToolsResourcesAndImages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, mcpclient.Opts{Servers: []mcpclient.Server{selfServer(t, "self", nil)}})
	servers := c.Servers(ctx)
	require.Len(t, servers, 1)
	require.NoError(t, servers[0].Err)
	var names []string
	for _, tool := range servers[0].Tools {
		names = append(names, tool.Name)
	}
	require.ElementsMatch(t, []string{"echo", "env", "picture", "crash"}, names)
	require.Equal(t, []agent.MCPResource{{URI: "test://notes/readme", Name: "readme", MIMEType: "text/plain"}}, servers[0].Resources)

	res, err := c.CallTool(ctx, "self", "echo", map[string]any{"text": "ab", "times": json.Number("3")})
	require.NoError(t, err)
	require.Equal(t, agent.MCPResult{Text: "ababab"}, res)

	res, err = c.CallTool(ctx, "self", "picture", nil)
	require.NoError(t, err)
	require.Equal(t, "here it is\n[image: image/png, 9 bytes, not shown]", res.Text)

	res, err = c.ReadResource(ctx, "self", "test://notes/readme")
	require.NoError(t, err)
	require.Equal(t, "[resource test://notes/readme]\nthe notes", res.Text)
}

// Arguments that do not match the tool's schema are refused before the
// call, with the schema's complaint.
func TestArgumentsValidatedAgainstSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, mcpclient.Opts{Servers: []mcpclient.Server{selfServer(t, "self", nil)}})
	_, err := c.CallTool(ctx, "self", "echo", map[string]any{"times": 2})
	require.ErrorContains(t, err, `arguments of self/echo do not match its input schema`)
	require.ErrorContains(t, err, "text")
	_, err = c.CallTool(ctx, "self", "echo", map[string]any{"text": 5})
	require.ErrorContains(t, err, `arguments of self/echo do not match its input schema`)
	_, err = c.CallTool(ctx, "self", "nope", nil)
	require.EqualError(t, err, `MCP server "self" has no tool "nope" (tools: crash, echo, env, picture)`)
	_, err = c.CallTool(ctx, "other", "echo", nil)
	require.EqualError(t, err, `no MCP server named "other" (servers: self)`)
}

// A stdio server sees the allowlisted environment plus its own env,
// names as written, and nothing else.
func TestStdioEnvironment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	environ := append(os.Environ(), "TASKLOOM_TEST_SECRET=hunter22", "TASKLOOM_TEST_ALLOWED=yes")
	c := newClient(t, mcpclient.Opts{
		Servers:  []mcpclient.Server{selfServer(t, "self", map[string]string{"Mixed_Case": "kept"})},
		EnvAllow: []string{"PATH", "TASKLOOM_TEST_ALLOWED"},
		Environ:  environ,
	})
	for name, want := range map[string]agent.MCPResult{
		"Mixed_Case":            {Text: "kept"},
		"TASKLOOM_TEST_ALLOWED": {Text: "yes"},
		"TASKLOOM_TEST_SECRET":  {Text: "TASKLOOM_TEST_SECRET is not set", IsError: true},
		"HOME":                  {Text: "HOME is not set", IsError: true},
	} {
		res, err := c.CallTool(ctx, "self", "env", map[string]any{"name": name})
		require.NoError(t, err)
		require.Equal(t, want, res, name)
	}
}

// A server that exits mid-call gives an error naming it, and the next
// call starts it again.
func TestCrashedServerIsRestarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, mcpclient.Opts{Servers: []mcpclient.Server{selfServer(t, "self", nil)}})
	_, err := c.CallTool(ctx, "self", "crash", nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), `MCP server "self" stopped during crash`)
	require.NotContains(t, err.Error(), "\n")
	requireEchoes(t, c, "self", "back")
}

// Broken servers: each gives one line naming the server and what went
// wrong, within the start timeout, and the others keep working.
func TestBrokenServersNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var warned []string
	c := newClient(t, mcpclient.Opts{
		Servers: []mcpclient.Server{
			{Name: "missing", Command: []string{"taskloom-no-such-mcp-server"}},
			{Name: "exits", Command: []string{"sh", "-c", "echo 'config file not found' >&2; exit 3"}},
			{Name: "silent", Command: []string{"sh", "-c", "exec sleep 60"}},
			// Its token would go to the model with the error.
			{Name: "nohttp", URL: "http://u:pass-0123456789@127.0.0.1:1/mcp?token=tok-0123456789"},
			selfServer(t, "self", nil),
		},
		StartTimeout: 2 * time.Second,
		WarnFunc:     func(msg string) { warned = append(warned, msg) },
	})
	servers := c.Servers(ctx)
	require.Len(t, servers, 5)
	errs := map[string]string{}
	for _, s := range servers {
		if s.Err != nil {
			errs[s.Name] = s.Err.Error()
			require.NotContains(t, s.Err.Error(), "\n", s.Name)
			require.True(t, strings.HasPrefix(s.Err.Error(), fmt.Sprintf("MCP server %q ", s.Name)), s.Err.Error())
		}
	}
	require.Len(t, errs, 4)
	require.Contains(t, errs["missing"], "could not start")
	require.Contains(t, errs["missing"], "taskloom-no-such-mcp-server")
	require.Contains(t, errs["exits"], "its stderr ends: config file not found")
	require.Contains(t, errs["silent"], "did not answer within 2s")
	require.Contains(t, errs["nohttp"], "at http://u:xxxxx@127.0.0.1:1/mcp?token=xxxxx failed at initialize")
	require.NotContains(t, errs["nohttp"], "tok-0123456789")
	require.NotContains(t, errs["nohttp"], "pass-0123456789")
	require.Len(t, warned, 4)
	require.NotContains(t, strings.Join(warned, "\n"), "0123456789")

	// A failed server answers at once with the same error until
	// RetryAfter, rather than being started on every call.
	start := time.Now()
	_, err := c.CallTool(ctx, "silent", "x", nil)
	require.EqualError(t, err, errs["silent"])
	require.ErrorIs(t, err, agent.ErrMCPUnavailable, "a server that is down is not the model's mistake")
	_, err = c.CallTool(ctx, "self", "no-such-tool", nil)
	require.NotErrorIs(t, err, agent.ErrMCPUnavailable, "an unknown tool is")
	require.Less(t, time.Since(start), time.Second)
	require.Len(t, warned, 4)

	requireEchoes(t, c, "self", "fine")
}

// A server that cannot start is named once, however often it is tried
// again; one that started since and fails again is named again.
func TestFailedServerNamedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var warned []string
	c := newClient(t, mcpclient.Opts{
		Servers:    []mcpclient.Server{{Name: "missing", Command: []string{"taskloom-no-such-mcp-server"}}},
		RetryAfter: time.Millisecond,
		WarnFunc:   func(msg string) { warned = append(warned, msg) },
	})
	for range 3 {
		c.Servers(ctx)
		time.Sleep(5 * time.Millisecond)
	}
	require.Len(t, warned, 1, "%q", warned)
}

// A start cut short by the caller (Ctrl-C) is no failure of the server's:
// it is not named, and the next call starts it afresh.
func TestStartStoppedByTheCaller(t *testing.T) {
	t.Parallel()
	var warned []string
	c := newClient(t, mcpclient.Opts{
		Servers:  []mcpclient.Server{{Name: "silent", Command: []string{"sh", "-c", "exec sleep 60"}}},
		WarnFunc: func(msg string) { warned = append(warned, msg) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.CallTool(ctx, "silent", "x", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, warned)
}

// A relative command in the repo's config is the repo's, wherever taskloom
// was started from, and the server starts in the repo.
func TestRelativeCommandIsTheRepos(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	self := selfServer(t, "self", nil)
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "tools"), 0o755))
	require.NoError(t, os.Symlink(self.Command[0], filepath.Join(repo, "tools", "server")))
	self.Command = []string{"./tools/server"}
	c := newClient(t, mcpclient.Opts{Servers: []mcpclient.Server{self}, Dir: repo})
	requireEchoes(t, c, "self", "from the repo")
}

// A streamable-HTTP server, served in-process by the SDK.
func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testServer() }, nil))
	t.Cleanup(srv.Close)
	c := newClient(t, mcpclient.Opts{Servers: []mcpclient.Server{{Name: "web", URL: srv.URL}}})
	servers := c.Servers(ctx)
	require.NoError(t, servers[0].Err)
	require.Len(t, servers[0].Tools, 4)
	requireEchoes(t, c, "web", "over http")
	res, err := c.ReadResource(ctx, "web", "test://notes/readme")
	require.NoError(t, err)
	require.Equal(t, "[resource test://notes/readme]\nthe notes", res.Text)
}

// What a server returns goes to the model and the history: the secrets it
// was given in its env, and this process's that it could read, are
// redacted from it.
func TestResultsAreRedacted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	environ := append(os.Environ(), "TASKLOOM_TEST_KEY=sk-test-0123456789abcdef")
	c := newClient(t, mcpclient.Opts{
		Servers:  []mcpclient.Server{selfServer(t, "self", map[string]string{"SERVER_TOKEN": "tok-server-secret-value"})},
		EnvAllow: []string{"PATH"},
		Environ:  environ,
	})
	res, err := c.CallTool(ctx, "self", "env", map[string]any{"name": "SERVER_TOKEN"})
	require.NoError(t, err)
	require.NotContains(t, res.Text, "tok-server-secret-value")
	require.Contains(t, res.Text, "REDACTED")
	res, err = c.CallTool(ctx, "self", "echo", map[string]any{"text": "key sk-test-0123456789abcdef"})
	require.NoError(t, err)
	require.NotContains(t, res.Text, "sk-test-0123456789abcdef")
}
