// Package mcptest finds the third-party MCP servers that the tests run
// for real: @modelcontextprotocol/server-filesystem and
// @modelcontextprotocol/server-everything, installed from npm by .ci/run.
package mcptest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// NPMServers returns the folder holding the servers' binaries
// (mcp-server-filesystem, mcp-server-everything): under
// $TASKLOOM_TEST_MCP_SERVERS, else ~/.cache/taskloom-test-mcp. Without
// them the test is skipped with one line saying how to install them, and
// fails under CI=true.
func NPMServers(tb testing.TB) string {
	tb.Helper()
	root := os.Getenv("TASKLOOM_TEST_MCP_SERVERS")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "taskloom-test-mcp")
	}
	bin := filepath.Join(root, "node_modules", ".bin")
	for _, name := range []string{"mcp-server-filesystem", "mcp-server-everything"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			msg := fmt.Sprintf("%s missing; install with: npm install --prefix %s @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-everything", name, root)
			if os.Getenv("CI") == "true" {
				tb.Fatal(msg)
			}
			tb.Skip(msg)
		}
	}
	return bin
}
