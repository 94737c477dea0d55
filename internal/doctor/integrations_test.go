package doctor

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/integrations/linear/lineartest"
	"github.com/taskloom/taskloom/internal/testkit"
)

// TestIntegrationsChecks: doctor has a line per MCP server (its command
// found, its address answering) and one for the Linear sync when it is
// on (the key set, the team known to Linear).
func TestIntegrationsChecks(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"a": "a"})
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
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
			{Name: "sh", Command: []string{"sh"}},
			{Name: "missing", Command: []string{"/nonexistent/mcp-server"}},
			{Name: "web", URL: up.URL + "/mcp?token=s3cret"},
			{Name: "down", URL: down},
		}
	})
	require.Equal(t, "ok", cs["mcp sh"].Level, cs["mcp sh"].Detail)
	require.Equal(t, "warn", cs["mcp missing"].Level)
	require.Contains(t, cs["mcp missing"].Detail, "/nonexistent/mcp-server is not found")
	require.Equal(t, "ok", cs["mcp web"].Level, cs["mcp web"].Detail)
	require.NotContains(t, cs["mcp web"].Detail, "s3cret")
	require.Equal(t, "warn", cs["mcp down"].Level)
	require.Contains(t, cs["mcp down"].Detail, "does not answer")
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
