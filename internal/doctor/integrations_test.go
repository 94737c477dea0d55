package doctor

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/integrations/linear/lineartest"
	"github.com/taskloom/taskloom/internal/testkit"
)

// TestIntegrationsChecks: doctor has a line per MCP server (started as a
// run starts it, its tools listed) and one for the Linear sync when it is
// on (the key set, the team known to Linear).
func TestIntegrationsChecks(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"a": "a"})
	mcpServer := mcp.NewServer(&mcp.Implementation{Name: "doctor-test", Version: "1"}, nil)
	mcp.AddTool(mcpServer, &mcp.Tool{Name: "echo", Description: "echoes"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil))
	defer up.Close()
	notMCP := httptest.NewServer(http.NotFoundHandler())
	defer notMCP.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + ln.Addr().String() + "/mcp"
	require.NoError(t, ln.Close())
	const key = "lin_api_doctor_0123456789"
	fake := lineartest.New(t, lineartest.Opts{Key: key})

	checks := func(edit func(*config.Config)) map[string]Check {
		cs, err := Run(context.Background(), repo, func(string) (config.Config, error) {
			c := config.Default()
			c.Verify.Command = []string{"true"}
			edit(&c)
			return c, nil
		})
		require.NoError(t, err)
		out := map[string]Check{}
		for _, c := range cs {
			out[c.Name] = c
		}
		return out
	}
	cs := checks(func(c *config.Config) {
		c.MCP.Servers = []config.MCPServer{
			// Found on PATH, yet no MCP server: it exits at once.
			{Name: "true", Command: []string{"true"}},
			{Name: "missing", Command: []string{"/nonexistent/mcp-server"}},
			{Name: "web", URL: up.URL + "/mcp?token=s3cret"},
			// A port that answers, but not in MCP.
			{Name: "web404", URL: notMCP.URL + "/mcp?token=s3cret"},
			{Name: "down", URL: down},
		}
	})
	require.Equal(t, "warn", cs["mcp true"].Level, cs["mcp true"].Detail)
	require.Contains(t, cs["mcp true"].Detail, "initialize")
	require.Equal(t, "warn", cs["mcp missing"].Level)
	require.Contains(t, cs["mcp missing"].Detail, "/nonexistent/mcp-server")
	require.Equal(t, "ok", cs["mcp web"].Level, cs["mcp web"].Detail)
	require.Equal(t, "1 tools, 0 resources", cs["mcp web"].Detail)
	require.Equal(t, "warn", cs["mcp web404"].Level, cs["mcp web404"].Detail)
	require.Equal(t, "warn", cs["mcp down"].Level)
	for _, c := range cs {
		require.NotContains(t, c.Detail, "s3cret")
		require.NotContains(t, c.Detail, "\n", "one line: %s", c.Name)
	}
	_, ok := cs["linear"]
	require.False(t, ok, "no line while the sync is off")

	linearOn := func(team string) func(*config.Config) {
		return func(c *config.Config) {
			c.Integrations.Linear = config.Linear{Enabled: true, TeamID: team, URL: fake.URL}
		}
	}
	t.Setenv("LINEAR_API_KEY", "")
	cs = checks(linearOn(lineartest.TeamID))
	require.Equal(t, "warn", cs["linear"].Level)
	require.Contains(t, cs["linear"].Detail, "LINEAR_API_KEY is not set")
	t.Setenv("LINEAR_API_KEY", key)
	cs = checks(linearOn(lineartest.TeamID))
	require.Equal(t, "ok", cs["linear"].Level, cs["linear"].Detail)
	cs = checks(linearOn("NOPE"))
	require.Equal(t, "warn", cs["linear"].Level)
	require.Contains(t, cs["linear"].Detail, "set integrations.linear.team_id")
	require.NotContains(t, cs["linear"].Detail, key)
}
