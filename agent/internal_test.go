package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/taskloom/taskloom/llm"
	"github.com/tmc/langchaingo/llms"
)

func TestApplyDiff(t *testing.T) {
	t.Parallel()
	const file = "package a\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 1\n}\n"
	cases := []struct {
		name, diff, want, err string
	}{
		{
			name: "one block",
			diff: "<<<<<<< SEARCH\nfunc A() int {\n\treturn 1\n=======\nfunc A() int {\n\treturn 2\n>>>>>>> REPLACE\n",
			want: strings.Replace(file, "return 1", "return 2", 1),
		},
		{
			name: "two blocks in order, with the optional header",
			diff: "<<<<<<< SEARCH\n:start_line:3\n-------\nfunc A() int {\n=======\nfunc AA() int {\n>>>>>>> REPLACE\n\n<<<<<<< SEARCH\nfunc B() int {\n=======\nfunc BB() int {\n>>>>>>> REPLACE",
			want: strings.Replace(strings.Replace(file, "A()", "AA()", 1), "B()", "BB()", 1),
		},
		{
			name: "ambiguous without start_line",
			diff: "<<<<<<< SEARCH\n\treturn 1\n=======\n\treturn 3\n>>>>>>> REPLACE",
			err:  "matches 2 places (lines 4, 8)",
		},
		{
			name: "start_line picks the nearest",
			diff: "<<<<<<< SEARCH\n:start_line:7\n-------\n\treturn 1\n=======\n\treturn 3\n>>>>>>> REPLACE",
			want: "package a\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 3\n}\n",
		},
		{
			name: "trailing whitespace tolerated",
			diff: "<<<<<<< SEARCH\nfunc A() int {   \n=======\nfunc A() int64 {\n>>>>>>> REPLACE",
			want: strings.Replace(file, "func A() int {", "func A() int64 {", 1),
		},
		{
			name: "delete lines",
			diff: "<<<<<<< SEARCH\n\nfunc B() int {\n\treturn 1\n}\n=======\n>>>>>>> REPLACE",
			want: "package a\n\nfunc A() int {\n\treturn 1\n}\n",
		},
		{name: "no match", diff: "<<<<<<< SEARCH\nfunc C() {\n=======\nx\n>>>>>>> REPLACE", err: "does not match"},
		{name: "second block fails, nothing applied", diff: "<<<<<<< SEARCH\nfunc A() int {\n=======\nfunc Z() int {\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nnope\n=======\nx\n>>>>>>> REPLACE", err: "block 2"},
		{name: "unterminated", diff: "<<<<<<< SEARCH\nfunc A() int {\n=======\nx\n", err: "unterminated"},
		{name: "no block", diff: "just text", err: "text outside"},
		{name: "empty search", diff: "<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE", err: "SEARCH section is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := applyDiff(file, tc.diff)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got, "got %q, want %q", got, tc.want)
		})
	}
}

func TestApplyDiffKeepsCRLF(t *testing.T) {
	t.Parallel()
	got, _, err := applyDiff("a\r\nb\r\n", "<<<<<<< SEARCH\nb\n=======\nc\n>>>>>>> REPLACE")
	require.NoError(t, err)
	require.Equal(t, "a\r\nc\r\n", got)
}

func TestCommandPolicy(t *testing.T) {
	t.Parallel()
	p := CommandPolicy{
		Allow: []string{"go test", "go build", "ls", "git status", "git push --dry-run", "echo"},
		Deny:  []string{"git push", "rm -rf"},
	}
	cases := []struct {
		cmd string
		ok  bool
	}{
		{"go test ./...", true},
		{"go test ./... 2>&1 | head -50", false}, // head is not allowed
		{"go build ./... && go test ./...", true},
		{"GOFLAGS=-mod=mod go test ./...", true},
		{"go vet ./...", false},
		{"gotest", false},
		{"git push origin main", false},
		{"git push --dry-run origin", true}, // a longer allow prefix wins
		{"ls; rm -rf /", false},
		{"echo 'a; rm -rf /'", true}, // quoted: one command
		{"echo $(rm -rf /)", false},
		{"echo `id`", false},
		{"echo $((1+2))", true},
		{"echo $(( $(id) ))", false},
		{"", false},
		// The same command, however it is spelled.
		{"/usr/bin/git push origin main", false},
		{"env GIT_DIR=x git push", false},
		{"env -u HOME /usr/bin/env git push", false},
		{"sh -c 'git push origin main'", false},
		{"bash -c \"echo hi; sh -c 'git push'\"", false},
		{"git -C . push --receive-pack='git receive-pack' ../.. HEAD:main", false},
		{"git -c core.x=y --no-pager push", false},
		{"command git push", false},
		{"(cd sub && git push)", false},
		{"if true; then git push; fi", false},
		{"$GIT push", false},
		{"ls 'rm -rf /'", true},
		{"ls \"$HOME\"", true},
	}
	for _, tc := range cases {
		err := p.Check(tc.cmd)
		require.Equal(t, tc.ok, err == nil, "command %q: got err %v", tc.cmd, err)
	}
	require.NoError(t, CommandPolicy{}.Check("anything $(goes)"))
	star := CommandPolicy{Allow: []string{"*"}, Deny: []string{"git push"}}
	require.NoError(t, star.Check("make all"))
	require.Error(t, star.Check("git push"))
}

func TestParseArguments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw string
		ok  bool
	}{
		{`{"path": "a"}`, true},
		{`  {"path": "a"}  `, true},
		{``, true},
		{`{"path": "a"`, false},
		{`{"path": "a"}extra`, false},
		{`{"path": "a"}}`, false},
		{`{"path": "a"} {"path": "b"}`, false},
		{`["path"]`, false},
		{`"path"`, false},
		{`{"content": "Line 1` + "\n" + `Line 2"}`, false}, // an unescaped newline
	}
	for _, tc := range cases {
		_, err := parseArguments(tc.raw)
		require.Equal(t, tc.ok, err == nil, "arguments %q: got err %v", tc.raw, err)
	}
	require.Equal(t, canonicalArgs(`{"b":1, "a":2}`), canonicalArgs(`{"a":2,"b":1}`))
}

func TestCheckParams(t *testing.T) {
	t.Parallel()
	spec, _ := specByName(ToolReadFile)
	a, err := checkParams(spec, map[string]any{"path": "a", "start_line": "3"})
	require.NoError(t, err)
	require.Equal(t, 3, a.num["start_line"])
	_, err = checkParams(spec, map[string]any{"path": "a", "start_line": 1.5})
	require.ErrorContains(t, err, "must be an integer")
	_, err = checkParams(spec, map[string]any{"path": "a", "lines": 3})
	require.ErrorContains(t, err, "unknown parameter \"lines\"")
	todo, _ := specByName(ToolUpdateTodoList)
	_, err = checkParams(todo, map[string]any{"todos": []any{map[string]any{"id": "1", "content": "x", "status": "done"}}})
	require.ErrorContains(t, err, "status must be pending, in_progress or completed")
	_, err = checkParams(todo, map[string]any{"todos": "- [ ] x"})
	require.ErrorContains(t, err, "must be an array")
}

func TestResolveInRoot(t *testing.T) {
	t.Parallel()
	root, err := realDir(t.TempDir())
	require.NoError(t, err)
	outside := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a/b"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "out")))
	require.NoError(t, os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "in")))
	cases := []struct {
		path, want, err string
	}{
		{".", root, ""},
		{"a/b/new/file.go", filepath.Join(root, "a/b/new/file.go"), ""},
		{"a/../x", filepath.Join(root, "x"), ""},
		{"in/b", filepath.Join(root, "a/b"), ""},
		{"..", "", "leaves the worktree"},
		{"a/../../x", "", "leaves the worktree"},
		{"/tmp/x", "", "absolute"},
		{"~/x", "", "home-relative"},
		{"out/x", "", "outside the worktree"},
		{"out", "", "outside the worktree"},
		{"", "", "must not be empty"},
	}
	for _, tc := range cases {
		got, _, err := resolveInRoot(root, tc.path)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "path %q", tc.path)
			continue
		}
		require.NoError(t, err, "path %q", tc.path)
		require.Equal(t, tc.want, got, "path %q", tc.path)
	}
}

func TestRepairHistory(t *testing.T) {
	t.Parallel()
	api := []APIMessage{
		{Role: RoleUser, Content: []Block{{Type: BlockText, Text: "task"}}},
		{Role: RoleAssistant, Content: []Block{{Type: BlockToolUse, ID: "a"}, {Type: BlockToolUse, ID: "b"}}},
		{Role: RoleUser, Content: []Block{{Type: BlockToolResult, ToolUseID: "b"}}},
		{Role: RoleAssistant, Content: []Block{{Type: BlockToolUse, ID: "c"}}},
	}
	require.Equal(t, 2, repairHistory(&api))
	require.Len(t, api, 5)
	require.Equal(t, []string{"a", "b"}, []string{api[2].Content[0].ToolUseID, api[2].Content[1].ToolUseID}, "results follow the tool_use order")
	require.Equal(t, "c", api[4].Content[0].ToolUseID)
	require.True(t, strings.HasPrefix(api[4].Content[0].Content, "interrupted"))
	require.Equal(t, 0, repairHistory(&api))
}

func TestFrontMatter(t *testing.T) {
	t.Parallel()
	fm, err := frontMatter("---\nname: x\ndescription: |\n  line one\n  line two\nother: 'it''s'\n---\nbody")
	require.NoError(t, err)
	require.Equal(t, "line one\nline two", fm["description"])
	require.Equal(t, "it's", fm["other"])
	_, err = frontMatter("---\nname: x\n")
	require.ErrorContains(t, err, "not closed")
}

func TestPricingFromModel(t *testing.T) {
	t.Parallel()
	o := (&Opts{Model: "anthropic:claude-sonnet-4-5"}).withDefaults()
	require.Equal(t, Pricing{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75}, o.Pricing)
	o = (&Opts{Model: "scripted:x.json"}).withDefaults()
	require.Equal(t, Pricing{}, o.Pricing)
	o = (&Opts{Model: "openai:gpt-4o", Pricing: Pricing{InputPerMTok: 1}}).withDefaults()
	require.Equal(t, Pricing{InputPerMTok: 1}, o.Pricing)
}

// RequireRequestPaired fails the test unless every tool call in the
// request msgs has its response, after it: providers refuse a request
// that splits a pair. where, said first in a failure, names the case. It
// is exported for the package's external tests too.
func RequireRequestPaired(t *testing.T, msgs []llms.MessageContent, where string) {
	t.Helper()
	calls, answered := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llms.ToolCall:
				calls[p.ID] = true
			case llms.ToolCallResponse:
				require.True(t, calls[p.ToolCallID], "%stool response %s before or without its call", where, p.ToolCallID)
				answered[p.ToolCallID] = true
			}
		}
	}
	require.Equal(t, calls, answered, "%sa tool call has no response in the request", where)
}

func TestCondenseNeverSplitsToolPairs(t *testing.T) {
	t.Parallel()
	script, err := llm.ParseScript([]byte(`{"conversations": [{"match": ".", "replies": [{"content": "summary"}]}]}`))
	require.NoError(t, err)
	for turns := 1; turns <= 6; turns++ {
		for keep := 1; keep <= 3; keep++ {
			a, err := New(llm.NewScripted(script), NewMemoryStore(), &Opts{KeepRecentTurns: keep, Skills: &SkillsOpts{NoGlobal: true}})
			require.NoError(t, err)
			rec := a.newRecord("c", "the task", ModeCode, t.TempDir(), nil)
			for i := range turns {
				var uses, results []Block
				for j := range i%3 + 1 {
					id := fmt.Sprintf("t%d_%d", i, j)
					uses = append(uses, Block{Type: BlockToolUse, ID: id, Name: ToolReadFile, Input: []byte(`{"path":"a"}`)})
					results = append(results, Block{Type: BlockToolResult, ToolUseID: id, Content: strings.Repeat("x", 100)})
				}
				rec.API = append(rec.API, APIMessage{Role: RoleAssistant, Content: uses}, APIMessage{Role: RoleUser, Content: results})
			}
			c, err := a.newConv(context.Background(), rec, &budget{})
			require.NoError(t, err)
			for round := range 2 {
				require.NoError(t, c.condense(context.Background(), 1, 0))
				msgs := c.request()
				RequireRequestPaired(t, msgs, fmt.Sprintf("turns %d keep %d round %d: ", turns, keep, round))
				require.Equal(t, "the task", msgs[1].Parts[0].(llms.TextContent).Text, "the task stays first")
			}
		}
	}
}

// A server's text in the system prompt is bounded: a long description, a
// huge schema and thousands of resources each take a bounded share.
func TestMCPPromptIsBounded(t *testing.T) {
	t.Parallel()
	var resources []MCPResource
	for i := range 5000 {
		resources = append(resources, MCPResource{URI: fmt.Sprintf("file:///r/%d", i), Name: fmt.Sprint(i)})
	}
	big := []byte(`{"type":"object","description":"` + strings.Repeat("s", 20000) + `"}`)
	p := mcpPrompt([]MCPServer{{Name: "wordy", Tools: []MCPTool{
		{Name: "long", Description: strings.Repeat("d", 100000), InputSchema: []byte(`{"type":"object"}`)},
		{Name: "schema", Description: "small", InputSchema: big},
	}, Resources: resources}})
	require.Less(t, len(p), 12000, "the prompt of one wordy server")
	require.Contains(t, p, "- long: "+strings.Repeat("d", mcpDescriptionRunes)+"…\n")
	require.Contains(t, p, `Input schema: {"type":"object"}`)
	require.Contains(t, p, fmt.Sprintf("Input schema: too large to show (%d bytes)", len(big)))
	require.Contains(t, p, "file:///r/99 (99)")
	require.NotContains(t, p, "file:///r/100 ")
	require.Contains(t, p, "- and 4900 more, not listed here\n")
}
