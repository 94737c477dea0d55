package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/internal/clip"
)

// MCP is what the agent needs of the MCP servers a run is configured
// with. The implementation (package mcpclient) starts them lazily, shares
// them between conversations and bounds every call with a timeout; the
// agent only lists and calls.
type MCP interface {
	// Servers returns every configured server with its tools and
	// resources, connecting those not yet connected; one that could not
	// start carries its error instead.
	Servers(ctx context.Context) []MCPServer
	// CallTool validates args against the tool's input schema and calls
	// it. The error is for a call that could not be made (unknown server
	// or tool, invalid arguments, a server that is down); a tool that
	// failed returns a result with IsError.
	CallTool(ctx context.Context, server, tool string, args map[string]any) (MCPResult, error)
	// ReadResource reads a resource of a server.
	ReadResource(ctx context.Context, server, uri string) (MCPResult, error)
}

// MCPServer is one configured MCP server as the model is shown it.
type MCPServer struct {
	Name      string
	Tools     []MCPTool
	Resources []MCPResource
	// Err is why the server is not available; nil when it is.
	Err error
}

// MCPTool is a tool an MCP server offers.
type MCPTool struct {
	Name        string
	Description string
	// InputSchema is the tool's JSON schema for its arguments.
	InputSchema json.RawMessage
}

// MCPResource is a resource an MCP server offers.
type MCPResource struct {
	URI         string
	Name        string
	Description string
	MIMEType    string
}

// MCPResult is what a tool call or a resource read returned, as text:
// text content as it is, images and audio as a note of their type and
// size, embedded resources and resource links with their URI.
type MCPResult struct {
	Text    string
	IsError bool
}

// MCP tool names, in the mcp group.
const (
	ToolUseMCPTool        = "use_mcp_tool"
	ToolAccessMCPResource = "access_mcp_resource"
)

// ErrMCPUnavailable marks an MCP call that failed because its server is
// down, crashed or did not answer in time: not the model's mistake, so it
// does not count toward the mistake limit.
var ErrMCPUnavailable = errors.New("MCP server unavailable")

// useMCPTool runs use_mcp_tool.
func (c *conv) useMCPTool(ctx context.Context, a args) callOutcome {
	server, tool := a.s("server_name"), a.s("tool_name")
	res, err := c.a.opts.MCP.CallTool(ctx, server, tool, a.obj["arguments"])
	if err != nil {
		return mcpError(ctx, ToolUseMCPTool, err)
	}
	return c.mcpOutcome(res)
}

// accessMCPResource runs access_mcp_resource.
func (c *conv) accessMCPResource(ctx context.Context, a args) callOutcome {
	res, err := c.a.opts.MCP.ReadResource(ctx, a.s("server_name"), a.s("uri"))
	if err != nil {
		return mcpError(ctx, ToolAccessMCPResource, err)
	}
	return c.mcpOutcome(res)
}

// mcpError is the outcome of an MCP call that failed: a mistake of the
// model's (an unknown tool, arguments off its schema) or a failure of the
// server's, which is not one.
func mcpError(ctx context.Context, tool string, err error) callOutcome {
	switch {
	case ctx.Err() != nil:
		return callOutcome{content: "Call interrupted: the conversation was cancelled.", isError: true, failed: true}
	case errors.Is(err, ErrMCPUnavailable):
		return callOutcome{content: fmt.Sprintf("Error: %s: %v", tool, err), isError: true, failed: true}
	}
	return toolError("%s: %v", tool, err)
}

func (c *conv) mcpOutcome(res MCPResult) callOutcome {
	text := res.Text
	if limit := c.a.opts.OutputLimit; len(text) > limit {
		text = text[:limit] + fmt.Sprintf("\n[output cut at %d bytes]", limit)
	}
	if text == "" {
		text = "(no content)"
	}
	if res.IsError {
		// The tool ran and said it failed: not a malformed call, but the
		// work it was asked to do is not done.
		return callOutcome{content: "Error: " + text, isError: true, failed: true}
	}
	return callOutcome{content: text}
}

// What one server may put in the system prompt. A server's text goes to
// the model on every call of every attempt: one with a page-long
// description per tool, or a resource per file of a large tree, would
// crowd out the task. A tool's schema still checks its calls in full.
const (
	mcpDescriptionRunes = 2048
	mcpSchemaBytes      = 8 << 10
	mcpResources        = 100
)

// mcpPrompt describes the servers to the model: each connected server's
// tools with their schemas and its resources, and each one that is down.
func mcpPrompt(servers []MCPServer) string {
	var b strings.Builder
	b.WriteString("\n====\n\nMCP SERVERS\n\n")
	b.WriteString("These servers give you more tools and resources. Call a tool with use_mcp_tool (server_name, tool_name, arguments: an object matching the tool's input schema) and read a resource with access_mcp_resource (server_name, uri).\n")
	for _, s := range servers {
		if s.Err != nil {
			fmt.Fprintf(&b, "\n## %s (unavailable)\n%s\n", s.Name, clip.Line(s.Err.Error(), 0))
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n", s.Name)
		if len(s.Tools) > 0 {
			b.WriteString("\n### Tools\n")
		}
		for _, t := range s.Tools {
			fmt.Fprintf(&b, "- %s: %s\n", t.Name, clip.Head(strings.TrimSpace(t.Description), mcpDescriptionRunes))
			switch n := len(t.InputSchema); {
			case n > mcpSchemaBytes:
				fmt.Fprintf(&b, "    Input schema: too large to show (%d bytes); a call that does not match it is answered with what is wrong\n", n)
			case n > 0:
				fmt.Fprintf(&b, "    Input schema: %s\n", t.InputSchema)
			}
		}
		if len(s.Resources) > 0 {
			b.WriteString("\n### Resources\n")
		}
		for i, r := range s.Resources {
			if i == mcpResources {
				fmt.Fprintf(&b, "- and %d more, not listed here\n", len(s.Resources)-i)
				break
			}
			fmt.Fprintf(&b, "- %s (%s)", r.URI, r.Name)
			if r.MIMEType != "" {
				fmt.Fprintf(&b, " [%s]", r.MIMEType)
			}
			if d := strings.TrimSpace(r.Description); d != "" {
				fmt.Fprintf(&b, ": %s", clip.Line(d, 0))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
