package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/mcpclient/mcptest"
	"github.com/taskloom/taskloom/llm"
)

// A taskloom run whose config lists the real npm filesystem and
// everything servers, and one that cannot start: T1's scripted worker
// writes a file through the filesystem server (outside the repo), reads a
// resource of the everything server and calls the broken one, then does
// its task. The broken server is named in one warning line and in the
// tool's result, the run completes, and T1's exported history holds the
// three results.
func TestE2EMCPServers(t *testing.T) {
	longE2E(t)
	bin := mcptest.NPMServers(t)
	shared, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	notes := filepath.Join(shared, "notes.txt")
	const uri = "demo://resource/static/document/architecture.md"
	mcpCall := func(name string, args map[string]any) llm.ScriptedToolCall {
		data, err := json.Marshal(args)
		require.NoError(t, err)
		return llm.ScriptedToolCall{Name: name, Arguments: data}
	}
	dir := exampleRepo(t, func(c map[string]any) {
		c["mcp"] = map[string]any{"servers": []map[string]any{
			{"name": "fs", "command": []string{filepath.Join(bin, "mcp-server-filesystem"), shared}},
			{"name": "everything", "command": []string{filepath.Join(bin, "mcp-server-everything")}},
			{"name": "broken", "command": []string{filepath.Join(shared, "no-such-mcp-server")}},
		}}
	}, func(s *llm.Script) {
		for i, c := range s.Conversations {
			if c.Match != `Task: T1 [\s\S]*Attempt: 1 of` {
				continue
			}
			first := []llm.Reply{
				{ToolCalls: []llm.ScriptedToolCall{mcpCall(agent.ToolUseMCPTool, map[string]any{"server_name": "fs", "tool_name": "write_file",
					"arguments": map[string]any{"path": notes, "content": "written by T1 through MCP\n"}})}},
				{ToolCalls: []llm.ScriptedToolCall{mcpCall(agent.ToolAccessMCPResource, map[string]any{"server_name": "everything", "uri": uri})}},
				{ToolCalls: []llm.ScriptedToolCall{mcpCall(agent.ToolUseMCPTool, map[string]any{"server_name": "broken", "tool_name": "query", "arguments": map[string]any{}})}},
			}
			s.Conversations[i].Replies = append(first, c.Replies...)
			return
		}
		t.Fatal("no conversation of T1's first attempt in the textkit script")
	})
	code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	require.Len(t, trailers(t, dir), 5, "every task is integrated")

	data, err := os.ReadFile(notes)
	require.NoError(t, err, "the tool's side effect")
	require.Equal(t, "written by T1 through MCP\n", string(data))
	warnings := regexp.MustCompile(`(?m)^taskloom: warning: MCP server "broken" \(.*no-such-mcp-server.*\) failed.*$`).FindAllString(stderr, -1)
	require.Len(t, warnings, 1, "the broken server is named once, on one line:\n%s", stderr)

	export := t.TempDir()
	code, hout, herr := taskloom(t, "history", id, "--task", "T1", "--export", export, "--repo", dir)
	require.Equal(t, 0, code, "%s%s", hout, herr)
	data, err = os.ReadFile(filepath.Join(export, agent.APIHistoryFile))
	require.NoError(t, err)
	var msgs []agent.APIMessage
	require.NoError(t, json.Unmarshal(data, &msgs))
	var results []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == agent.BlockToolResult {
				results = append(results, b.Content)
			}
		}
	}
	require.GreaterOrEqual(t, len(results), 3)
	require.Contains(t, results[0], "Successfully wrote to "+notes)
	require.Regexp(t, `^\[resource `+regexp.QuoteMeta(uri)+`\]\n.{20,}`, results[1], "the resource's text")
	require.Contains(t, results[2], `MCP server "broken"`)
	require.Contains(t, results[2], "no-such-mcp-server")
}
