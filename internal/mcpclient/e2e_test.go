package mcpclient_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/mcpclient"
	"github.com/taskloom/taskloom/internal/mcpclient/mcptest"
	"github.com/taskloom/taskloom/llm"
)

type call struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// script builds a scripted session for task T1: one reply per call, then
// attempt_completion.
func script(t *testing.T, calls ...call) *llm.Script {
	t.Helper()
	var replies []map[string]any
	for _, c := range calls {
		replies = append(replies, map[string]any{"tool_calls": []call{c}})
	}
	replies = append(replies, map[string]any{"tool_calls": []call{{Name: agent.ToolAttemptCompletion, Arguments: map[string]any{"result": "done"}}}})
	data, err := json.Marshal(map[string]any{"conversations": []map[string]any{{"match": `Task: T1\b`, "replies": replies}}})
	require.NoError(t, err)
	s, err := llm.ParseScript(data)
	require.NoError(t, err)
	return s
}

// runAgent runs task T1 with the scripted calls and the MCP client, and
// returns the exported api_conversation_history.json.
func runAgent(t *testing.T, c *mcpclient.Client, calls ...call) (*agent.Result, string) {
	t.Helper()
	ctx := context.Background()
	store := agent.NewMemoryStore()
	a, err := agent.New(llm.NewScripted(script(t, calls...)), store, &agent.Opts{
		Skills: &agent.SkillsOpts{NoGlobal: true}, MCP: c, MaxConsecutiveMistakes: 5,
	})
	require.NoError(t, err)
	res, err := a.Run(ctx, agent.Request{ID: "run/T1/1", Task: "Task: T1 — use the MCP servers\nAttempt: 1 of 3", Worktree: t.TempDir()})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, agent.Export(ctx, store, "run/T1/1", dir))
	data, err := os.ReadFile(filepath.Join(dir, agent.APIHistoryFile))
	require.NoError(t, err)
	return res, string(data)
}

// toolResults returns the tool_result texts of an exported API history,
// in order.
func toolResults(t *testing.T, history string) []string {
	t.Helper()
	var msgs []agent.APIMessage
	require.NoError(t, json.Unmarshal([]byte(history), &msgs))
	var out []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == agent.BlockToolResult {
				out = append(out, b.Content)
			}
		}
	}
	return out
}

// A scripted worker writes a file through @modelcontextprotocol/
// server-filesystem (a side effect outside the worktree), reads a
// resource and gets an image from @modelcontextprotocol/server-everything,
// and sends arguments the tool's schema refuses; the results are in the
// exported history.
func TestAgentUsesRealNPMServers(t *testing.T) {
	t.Parallel()
	bin := mcptest.NPMServers(t)
	shared, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	c := newClient(t, mcpclient.Opts{Servers: []mcpclient.Server{
		{Name: "fs", Command: []string{filepath.Join(bin, "mcp-server-filesystem"), shared}},
		{Name: "everything", Command: []string{filepath.Join(bin, "mcp-server-everything")}},
	}})
	notes := filepath.Join(shared, "notes.txt")
	const uri = "demo://resource/static/document/architecture.md"
	res, history := runAgent(t, c,
		call{agent.ToolUseMCPTool, map[string]any{"server_name": "fs", "tool_name": "write_file", "arguments": map[string]any{"path": notes, "content": "written through MCP\n"}}},
		call{agent.ToolAccessMCPResource, map[string]any{"server_name": "everything", "uri": uri}},
		call{agent.ToolUseMCPTool, map[string]any{"server_name": "everything", "tool_name": "get-tiny-image", "arguments": map[string]any{}}},
		call{agent.ToolUseMCPTool, map[string]any{"server_name": "fs", "tool_name": "write_file", "arguments": map[string]any{"path": filepath.Join(shared, "no-content.txt")}}},
	)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)

	data, err := os.ReadFile(notes)
	require.NoError(t, err)
	require.Equal(t, "written through MCP\n", string(data))
	_, err = os.Stat(filepath.Join(shared, "no-content.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "a call with invalid arguments must not run")

	results := toolResults(t, history)
	require.Len(t, results, 5)
	require.Contains(t, results[0], "Successfully wrote to "+notes)
	require.True(t, strings.HasPrefix(results[1], "[resource "+uri+"]\n"), results[1])
	require.Greater(t, len(results[1]), len("[resource "+uri+"]\n")+20, "the resource's text")
	require.Contains(t, results[2], "[image: image/png, ")
	require.Contains(t, results[3], "arguments of fs/write_file do not match its input schema")
	require.Contains(t, results[3], "content")
}

// A server that cannot start is named in the tool result; the
// conversation goes on with the servers that work.
func TestAgentWithBrokenServerGoesOn(t *testing.T) {
	t.Parallel()
	var warned []string
	c := newClient(t, mcpclient.Opts{
		Servers: []mcpclient.Server{
			{Name: "broken", Command: []string{"sh", "-c", "echo 'cannot open database' >&2; exit 1"}},
			selfServer(t, "self", nil),
		},
		WarnFunc: func(msg string) { warned = append(warned, msg) },
	})
	// A server that is down is no mistake of the model's: as many calls
	// to it in a row as the mistake limit (5) do not stop the
	// conversation.
	broken := func(sql string) call {
		return call{agent.ToolUseMCPTool, map[string]any{"server_name": "broken", "tool_name": "query", "arguments": map[string]any{"sql": sql}}}
	}
	res, history := runAgent(t, c, broken("select 1"), broken("select 2"), broken("select 3"), broken("select 4"), broken("select 5"),
		call{agent.ToolUseMCPTool, map[string]any{"server_name": "self", "tool_name": "echo", "arguments": map[string]any{"text": "still here"}}},
	)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	results := toolResults(t, history)
	require.Len(t, results, 7)
	require.Contains(t, results[0], `use_mcp_tool: MCP server "broken" (sh -c`)
	require.Contains(t, results[0], "its stderr ends: cannot open database")
	require.Equal(t, "still here", results[5])
	require.Len(t, warned, 1, "named once")
}
