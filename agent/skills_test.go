package agent_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/config"
)

func skill(t *testing.T, dir, folder, frontMatter string) string {
	t.Helper()
	p := filepath.Join(dir, folder, agent.SkillFile)
	writeFile(t, p, "---\n"+frontMatter+"\n---\n\n# "+folder+"\n\nInstructions.\n")
	return p
}

func TestDiscoverSkills(t *testing.T) {
	t.Parallel()
	global := t.TempDir()
	wt := t.TempDir()
	skill(t, filepath.Join(global, "skills"), "go-testing", "name: go-testing\ndescription: Global Go testing advice.")
	skill(t, filepath.Join(global, "skills"), "release", "name: release\ndescription: 'Global release steps.'")
	skill(t, filepath.Join(global, "skills"), "sql", "name: sql\ndescription: Global SQL.")
	// Project overrides global.
	projectGo := skill(t, filepath.Join(wt, ".taskloom", "skills"), "go-testing", "name: go-testing\ndescription: \"Project Go testing: table tests.\"")
	// Mode-specific overrides generic, globally too.
	skill(t, filepath.Join(global, "skills-code"), "sql", "name: sql\ndescription: Code-mode SQL.")
	skill(t, filepath.Join(global, "skills-ask"), "only-ask", "name: only-ask\ndescription: Ask mode only.")
	// Compatibility folders.
	skill(t, filepath.Join(wt, ".claude", "skills"), "docs", "name: docs\ndescription: >\n  Writing docs,\n  folded.")
	skill(t, filepath.Join(wt, ".agents", "skills"), "lint", "name: lint\ndescription: Lint rules.")
	// Invalid ones.
	skill(t, filepath.Join(wt, ".taskloom", "skills"), "mismatch", "name: other-name\ndescription: Wrong folder.")
	skill(t, filepath.Join(wt, ".taskloom", "skills"), "Bad_Name", "name: Bad_Name\ndescription: Not kebab.")
	skill(t, filepath.Join(wt, ".taskloom", "skills"), "no-desc", "name: no-desc")
	skill(t, filepath.Join(wt, ".taskloom", "skills"), "long-desc", "name: long-desc\ndescription: "+strings.Repeat("x", 1025))
	writeFile(t, filepath.Join(wt, ".taskloom", "skills", "no-front", agent.SkillFile), "# just markdown\n")

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	got := agent.DiscoverSkills(context.Background(), &agent.SkillsOpts{GlobalDir: global}, wt, agent.ModeCode, logger)

	byName := map[string]agent.Skill{}
	var names []string
	for _, s := range got {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"docs", "go-testing", "lint", "release", "sql"}, names)
	require.Equal(t, "Project Go testing: table tests.", byName["go-testing"].Description)
	require.Equal(t, "project", byName["go-testing"].Source)
	require.Equal(t, ".taskloom/skills/go-testing/SKILL.md", byName["go-testing"].Location)
	require.Equal(t, projectGo, byName["go-testing"].Path)
	require.Equal(t, "Global release steps.", byName["release"].Description)
	require.Equal(t, filepath.Join(global, "skills", "release", agent.SkillFile), byName["release"].Location)
	require.Equal(t, "Code-mode SQL.", byName["sql"].Description)
	require.Equal(t, "code", byName["sql"].Mode)
	require.Equal(t, "Writing docs, folded.", byName["docs"].Description)

	for _, bad := range []string{"mismatch", "Bad_Name", "no-desc", "long-desc", "no-front"} {
		require.Contains(t, logs.String(), filepath.Join(bad, agent.SkillFile), "invalid skill %s is logged", bad)
	}
	require.Equal(t, 5, strings.Count(logs.String(), "skip invalid skill"))

	require.Empty(t, agent.DiscoverSkills(context.Background(), &agent.SkillsOpts{GlobalDir: global, Disabled: true}, wt, agent.ModeCode, nil))
}

func TestSkillsInSystemPromptAndReadable(t *testing.T) {
	t.Parallel()
	global := t.TempDir()
	globalSkill := skill(t, filepath.Join(global, "skills"), "go-testing", "name: go-testing\ndescription: Go testing advice.")
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "`+globalSkill+`"}}]},
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "`+filepath.Join(global, "other.txt")+`"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`,
		&agent.Opts{Skills: &agent.SkillsOpts{GlobalDir: global}})
	writeFile(t, filepath.Join(global, "other.txt"), "not a skill\n")
	e.run(t, "c", "Write tests", "")

	sys := systemText(e.model.last())
	require.Contains(t, sys, "<mandatory_skill_check>")
	require.Contains(t, sys, "load it first with read_file")
	require.Contains(t, sys, "- go-testing: Go testing advice.\n  Location: "+globalSkill)

	rec := e.load(t, "c")
	r := resultFor(t, rec, 0)
	require.False(t, r.IsError, r.Content)
	require.Contains(t, r.Content, "# go-testing")
	r = resultFor(t, rec, 1)
	require.True(t, r.IsError, "only skill files may be read outside the worktree")
	require.Contains(t, r.Content, "absolute paths are not allowed")
}

// TestDiscoverSkillsRepoAndExtraDirs: the repo's own .taskloom/skills
// reaches a worktree that lacks it (git leaves the excluded .taskloom/
// out), and skills_dirs entries are folders of skills added to the default
// locations, not roots that replace them.
func TestDiscoverSkillsRepoAndExtraDirs(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	wt := t.TempDir()
	extra := t.TempDir()
	repoSkill := skill(t, filepath.Join(repo, ".taskloom", "skills"), "house-style", "name: house-style\ndescription: The repo's style.")
	skill(t, filepath.Join(repo, ".taskloom", "skills-code"), "code-only", "name: code-only\ndescription: Code mode, from the repo.")
	skill(t, filepath.Join(wt, ".claude", "skills"), "docs", "name: docs\ndescription: Docs from .claude.")
	// An extra folder relative to the repo, and an absolute one that
	// overrides a default skill of the same name.
	relSkill := skill(t, filepath.Join(repo, "tools", "skills"), "release", "name: release\ndescription: Release steps.")
	skill(t, extra, "docs", "name: docs\ndescription: Docs from skills_dirs.")
	// The old, wrong reading of an entry as a root: DIR/skills/<name>.
	skill(t, filepath.Join(extra, "skills"), "nested", "name: nested\ndescription: Not a skill of extra.")

	got := agent.DiscoverSkills(context.Background(), &agent.SkillsOpts{NoGlobal: true, RepoDir: repo, Dirs: []string{"tools/skills", extra}},
		wt, agent.ModeCode, nil)
	byName := map[string]agent.Skill{}
	var names []string
	for _, s := range got {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"code-only", "docs", "house-style", "release"}, names)
	require.Equal(t, repoSkill, byName["house-style"].Location, "outside the worktree: an absolute location")
	require.Equal(t, "project", byName["house-style"].Source)
	require.Equal(t, relSkill, byName["release"].Location)
	require.Equal(t, "Docs from skills_dirs.", byName["docs"].Description)
}

func TestContextWindowHasOneDefault(t *testing.T) {
	t.Parallel()
	require.Equal(t, agent.DefaultContextWindow, config.Default().Agent.ContextWindow)
}
