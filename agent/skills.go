package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SkillFile is the file that defines a skill, in a folder named after it.
const SkillFile = "SKILL.md"

// Skill is a SKILL.md found on disk.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Path is the absolute path of the SKILL.md file.
	Path string `json:"path"`
	// Location is the path the model passes to read_file: relative to the
	// worktree for project skills, absolute for global ones.
	Location string `json:"location"`
	// Source is "global" or "project".
	Source string `json:"source"`
	// Mode is the mode slug of a skills-<mode> folder, or empty.
	Mode string `json:"mode,omitempty"`
}

// SkillsOpts says where skills are looked for. Skills live in folders
// <root>/skills/<name>/SKILL.md and <root>/skills-<mode>/<name>/SKILL.md.
// The global root is GlobalDir; the project roots are .claude, .agents and
// .taskloom in the worktree, and .taskloom in RepoDir (git does not carry
// an excluded .taskloom/ into worktrees). Dirs adds folders of skills,
// <dir>/<name>/SKILL.md, to these. Precedence, lowest first: global
// generic, global mode-specific, project generic (.claude, .agents,
// .taskloom), project mode-specific, then Dirs in their order. A skill
// overrides a lower one of the same name.
type SkillsOpts struct {
	// GlobalDir is the global root; "" means ~/.taskloom.
	GlobalDir string
	// NoGlobal skips the global root.
	NoGlobal bool
	// ProjectRoots replaces the project roots (relative to the worktree).
	ProjectRoots []string
	// RepoDir is the repository the worktree was made from: its
	// .taskloom/skills and .taskloom/skills-<mode> are read there, below
	// the worktree's own .taskloom. "" reads only the worktree.
	RepoDir string
	// Dirs are extra folders of skills (agent.skills_dirs), each skill a
	// folder with a SKILL.md in it. A relative one is relative to RepoDir,
	// or to the worktree when RepoDir is "".
	Dirs []string
	// Disabled turns skills off.
	Disabled bool
}

var defaultProjectRoots = []string{".claude", ".agents", ".taskloom"}

// SkillError is why a SKILL.md was skipped.
type SkillError struct {
	Path   string
	Reason string
}

func (e *SkillError) Error() string { return fmt.Sprintf("skill %s: %s", e.Path, e.Reason) }

// DiscoverSkills finds the skills visible to a conversation in mode working
// in worktree. Invalid skills are logged at warn level and skipped.
func DiscoverSkills(ctx context.Context, opts *SkillsOpts, worktree, mode string, logger *slog.Logger) []Skill {
	if opts == nil {
		opts = &SkillsOpts{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Disabled {
		return nil
	}
	type dir struct {
		path, source, mode string
	}
	var dirs []dir
	if !opts.NoGlobal {
		global := opts.GlobalDir
		if global == "" {
			if home, err := os.UserHomeDir(); err == nil {
				global = filepath.Join(home, ".taskloom")
			}
		}
		if global != "" {
			dirs = append(dirs, dir{filepath.Join(global, "skills"), "global", ""})
			if mode != "" {
				dirs = append(dirs, dir{filepath.Join(global, "skills-"+mode), "global", mode})
			}
		}
	}
	roots := opts.ProjectRoots
	if roots == nil {
		roots = defaultProjectRoots
	}
	// The repository's own .taskloom comes just below the worktree's.
	var paths []string
	for _, r := range roots {
		if opts.RepoDir != "" && r == ".taskloom" && !sameDir(opts.RepoDir, worktree) {
			paths = append(paths, filepath.Join(opts.RepoDir, r))
		}
		if worktree != "" {
			paths = append(paths, filepath.Join(worktree, r))
		}
	}
	for _, p := range paths {
		dirs = append(dirs, dir{filepath.Join(p, "skills"), "project", ""})
	}
	if mode != "" {
		for _, p := range paths {
			dirs = append(dirs, dir{filepath.Join(p, "skills-"+mode), "project", mode})
		}
	}
	for _, d := range opts.Dirs {
		if !filepath.IsAbs(d) {
			base := opts.RepoDir
			if base == "" {
				base = worktree
			}
			d = filepath.Join(base, d)
		}
		dirs = append(dirs, dir{d, "project", ""})
	}
	byName := map[string]Skill{}
	for _, d := range dirs {
		entries, err := os.ReadDir(d.path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				logger.WarnContext(ctx, "read skills folder", slog.String("path", d.path), slog.String("error", err.Error()))
			}
			continue
		}
		for _, e := range entries {
			folder := filepath.Join(d.path, e.Name())
			if st, err := os.Stat(folder); err != nil || !st.IsDir() {
				continue
			}
			file := filepath.Join(folder, SkillFile)
			if _, err := os.Stat(file); err != nil {
				continue
			}
			s, err := loadSkill(file, e.Name())
			if err != nil {
				logger.WarnContext(ctx, "skip invalid skill", slog.String("path", file), slog.String("error", err.Error()))
				continue
			}
			s.Source, s.Mode = d.source, d.mode
			s.Location = file
			if d.source == "project" && worktree != "" && within(worktree, file) {
				if rel, err := filepath.Rel(worktree, file); err == nil {
					s.Location = filepath.ToSlash(rel)
				}
			}
			if prev, ok := byName[s.Name]; ok {
				logger.DebugContext(ctx, "skill overridden", slog.String("skill", s.Name),
					slog.String("by", file), slog.String("over", prev.Path))
			}
			byName[s.Name] = s
		}
	}
	out := make([]Skill, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// loadSkill reads and validates one SKILL.md: its front matter has a
// kebab-case name equal to its folder's and a description of 1 to 1024
// characters.
func loadSkill(path, folder string) (Skill, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Skill{}, &SkillError{Path: path, Reason: err.Error()}
	}
	fm, err := frontMatter(string(data))
	if err != nil {
		return Skill{}, &SkillError{Path: path, Reason: err.Error()}
	}
	name, desc := fm["name"], strings.TrimSpace(fm["description"])
	switch {
	case name == "":
		return Skill{}, &SkillError{Path: path, Reason: "front matter has no name"}
	case !slugRE.MatchString(name):
		return Skill{}, &SkillError{Path: path, Reason: fmt.Sprintf("name %q is not kebab-case", name)}
	case name != folder:
		return Skill{}, &SkillError{Path: path, Reason: fmt.Sprintf("name %q does not match its folder %q", name, folder)}
	case desc == "":
		return Skill{}, &SkillError{Path: path, Reason: "front matter has no description"}
	case utf8.RuneCountInString(desc) > 1024:
		return Skill{}, &SkillError{Path: path, Reason: fmt.Sprintf("description has %d characters, more than 1024", utf8.RuneCountInString(desc))}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Skill{}, &SkillError{Path: path, Reason: err.Error()}
	}
	return Skill{Name: name, Description: desc, Path: abs}, nil
}

// frontMatter parses the simple YAML front matter of a Markdown file:
// "key: value" lines, quoted values, and folded (>) or literal (|) blocks.
func frontMatter(doc string) (map[string]string, error) {
	doc = strings.TrimPrefix(doc, "\ufeff")
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "---" {
		return nil, errors.New("no front matter (the file must start with ---)")
	}
	out := map[string]string{}
	var blockKey string
	var block []string
	folded := false
	endBlock := func() {
		if blockKey == "" {
			return
		}
		sep := "\n"
		if folded {
			sep = " "
		}
		out[blockKey] = strings.TrimSpace(strings.Join(block, sep))
		blockKey, block = "", nil
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "---" {
			endBlock()
			return out, nil
		}
		if blockKey != "" && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") || strings.TrimSpace(line) == "") {
			block = append(block, strings.TrimSpace(line))
			continue
		}
		endBlock()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("front matter line %q is not key: value", line)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch {
		case val == ">" || val == ">-" || val == "|" || val == "|-":
			blockKey, folded = key, strings.HasPrefix(val, ">")
		case strings.HasPrefix(val, `"`):
			uq, err := strconv.Unquote(val)
			if err != nil {
				return nil, fmt.Errorf("front matter key %s: bad quoted value", key)
			}
			out[key] = uq
		case strings.HasPrefix(val, "'") && strings.HasSuffix(val, "'") && len(val) >= 2:
			out[key] = strings.ReplaceAll(val[1:len(val)-1], "''", "'")
		default:
			out[key] = val
		}
	}
	return nil, errors.New("front matter is not closed with ---")
}

// skillFor returns the skill whose folder holds path (absolute, resolved),
// for read_file calls outside the worktree.
func skillFor(skills []Skill, path string) (Skill, bool) {
	for _, s := range skills {
		dir := filepath.Dir(s.Path)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		if within(dir, path) {
			return s, true
		}
	}
	return Skill{}, false
}

// sameDir reports whether a and b name the same existing directory.
func sameDir(a, b string) bool {
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}
