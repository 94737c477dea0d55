package repomap

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/taskloom/taskloom/llm"
)

// Limits of a map.
const (
	// MaxFiles bounds the files a map lists; a larger repository is
	// listed in path order up to it.
	MaxFiles = 5000
	// MaxSymbolsPerFile bounds the symbols shown for one file.
	MaxSymbolsPerFile = 12
	// maxParseBytes is the largest file whose symbols are read.
	maxParseBytes = 256 << 10
)

// File is one file of the map.
type File struct {
	Path    string   `json:"path"`
	Symbols []string `json:"symbols,omitempty"`
}

// Dir is a folder of the map and the files directly in it.
type Dir struct {
	// Path is the folder relative to the root, "." for the root.
	Path string `json:"path"`
	// Package names what the folder is: "go package x", "go module m",
	// "python package", "npm package p".
	Package []string `json:"package,omitempty"`
	Files   []File   `json:"files"`
}

// Map is a repository's tree, packages and exported symbols.
type Map struct {
	Dirs []Dir `json:"dirs"`
	// Files counts the files listed; Truncated is true when the repository
	// had more than MaxFiles.
	Files     int  `json:"files"`
	Truncated bool `json:"truncated,omitempty"`
}

// skipDirs are folders of dependencies and build output, never mapped when
// walking a folder that git does not describe.
var skipDirs = map[string]bool{"node_modules": true, "vendor": true, "dist": true, "build": true, "__pycache__": true,
	"target": true, "venv": true}

// Build maps the repository or folder at root.
func Build(root string) (*Map, error) {
	paths, err := ListFiles(root)
	if err != nil {
		return nil, err
	}
	m := &Map{}
	if len(paths) > MaxFiles {
		paths, m.Truncated = paths[:MaxFiles], true
	}
	m.Files = len(paths)
	byDir := map[string]*Dir{}
	var order []string
	for _, p := range paths {
		d := path.Dir(p)
		dir := byDir[d]
		if dir == nil {
			dir = &Dir{Path: d}
			byDir[d] = dir
			order = append(order, d)
		}
		syms, pkg := scan(filepath.Join(root, filepath.FromSlash(p)))
		if pkg != "" && !slices.Contains(dir.Package, pkg) {
			dir.Package = append(dir.Package, pkg)
		}
		dir.Files = append(dir.Files, File{Path: path.Base(p), Symbols: syms})
	}
	slices.Sort(order)
	for _, d := range order {
		m.Dirs = append(m.Dirs, *byDir[d])
	}
	return m, nil
}

// ListFiles returns the files of root, slash-separated and relative to it,
// sorted: those git tracks when root is in a repository whose index has
// entries, else those a walk finds (without hidden and dependency folders).
func ListFiles(root string) ([]string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if files, ok := trackedFiles(abs); ok {
		return files, nil
	}
	var out []string
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: left out
		}
		name := d.Name()
		if d.IsDir() {
			if p != abs && (strings.HasPrefix(name, ".") || skipDirs[name]) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(name, ".") {
			return nil
		}
		rel, err := filepath.Rel(abs, p)
		if err == nil {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// trackedFiles reads the files git tracks under abs from the index of the
// repository that holds it.
func trackedFiles(abs string) ([]string, bool) {
	here, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, false
	}
	top, gitDir := findGitDir(here)
	if top == "" {
		return nil, false
	}
	prefix, err := filepath.Rel(top, here)
	if err != nil || strings.HasPrefix(prefix, "..") {
		return nil, false
	}
	prefix = filepath.ToSlash(prefix)
	f, err := os.Open(filepath.Join(gitDir, "index"))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var idx index.Index
	if err := index.NewDecoder(f).Decode(&idx); err != nil || len(idx.Entries) == 0 {
		return nil, false
	}
	var out []string
	for _, e := range idx.Entries {
		name := e.Name
		if prefix != "." {
			rest, ok := strings.CutPrefix(name, prefix+"/")
			if !ok {
				continue
			}
			name = rest
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

// findGitDir returns the work tree that holds dir and its git directory
// (a linked worktree's .git file names it), or "" outside a repository.
func findGitDir(dir string) (top, gitDir string) {
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".git")
		if st, err := os.Stat(p); err == nil {
			if st.IsDir() {
				return d, p
			}
			data, err := os.ReadFile(p)
			if rest, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:"); err == nil && ok {
				g := strings.TrimSpace(rest)
				if !filepath.IsAbs(g) {
					g = filepath.Join(d, g)
				}
				return d, g
			}
			return "", ""
		}
		if filepath.Dir(d) == d {
			return "", ""
		}
	}
}

var (
	pyDef     = regexp.MustCompile(`(?m)^(?:async\s+)?def\s+([A-Za-z]\w*)|^class\s+([A-Za-z]\w*)`)
	jsExport  = regexp.MustCompile(`(?m)^export\s+(?:default\s+)?(?:declare\s+)?(?:async\s+)?(?:abstract\s+)?(?:function\*?|class|const|let|var|interface|type|enum)\s+([A-Za-z_$][\w$]*)`)
	jsDefault = regexp.MustCompile(`(?m)^export\s+default\s+[^fcia]`)
	goModule  = regexp.MustCompile(`(?m)^module\s+(\S+)`)
	npmName   = regexp.MustCompile(`"name"\s*:\s*"([^"]+)"`)
)

// scan reads a file's exported symbols and what it says of its folder's
// package.
func scan(file string) (symbols []string, pkg string) {
	base := filepath.Base(file)
	ext := filepath.Ext(base)
	switch {
	case base == "go.mod", base == "package.json", base == "__init__.py", ext == ".go", ext == ".py",
		ext == ".ts", ext == ".tsx", ext == ".js", ext == ".jsx", ext == ".mjs":
	default:
		return nil, ""
	}
	st, err := os.Stat(file)
	if err != nil || st.Size() > maxParseBytes {
		return nil, ""
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, ""
	}
	switch {
	case base == "go.mod":
		if m := goModule.FindSubmatch(src); m != nil {
			return nil, "go module " + string(m[1])
		}
	case base == "package.json":
		if m := npmName.FindSubmatch(src); m != nil {
			return nil, "npm package " + string(m[1])
		}
	case ext == ".go":
		return goSymbols(file, src)
	case ext == ".py":
		for _, m := range pyDef.FindAllSubmatch(src, -1) {
			symbols = appendName(symbols, string(m[1])+string(m[2]))
		}
		if base == "__init__.py" {
			pkg = "python package"
		}
		return capSymbols(symbols), pkg
	default:
		for _, m := range jsExport.FindAllSubmatch(src, -1) {
			symbols = appendName(symbols, string(m[1]))
		}
		if jsDefault.Match(src) {
			symbols = appendName(symbols, "default")
		}
		return capSymbols(symbols), ""
	}
	return nil, ""
}

func appendName(list []string, name string) []string {
	if name == "" || strings.HasPrefix(name, "_") || slices.Contains(list, name) {
		return list
	}
	return append(list, name)
}

// goSymbols lists a Go file's exported declarations (methods as
// Type.Method) and its package; test files give only their package.
func goSymbols(file string, src []byte) ([]string, string) {
	f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, ""
	}
	pkg := "go package " + f.Name.Name
	if strings.HasSuffix(file, "_test.go") {
		return nil, ""
	}
	var syms []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				recv := receiverName(d.Recv.List[0].Type)
				if recv == "" || !ast.IsExported(recv) {
					continue
				}
				name = recv + "." + name
			}
			syms = appendName(syms, name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						syms = appendName(syms, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							syms = appendName(syms, n.Name)
						}
					}
				}
			}
		}
	}
	return capSymbols(syms), pkg
}

func receiverName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

func capSymbols(s []string) []string {
	if len(s) <= MaxSymbolsPerFile {
		return s
	}
	return append(s[:MaxSymbolsPerFile:MaxSymbolsPerFile], fmt.Sprintf("+%d more", len(s)-MaxSymbolsPerFile))
}

// Header is the first line of a rendered map.
const Header = "Repository map (the files that exist now; plan against them, modify rather than re-create):"

// Render writes the map in at most maxTokens tokens (llm.EstimateTokens),
// giving up detail as the package doc says. It returns "" when not even the
// header fits or the map is empty.
func (m *Map) Render(maxTokens int) string {
	if m == nil || len(m.Dirs) == 0 {
		return ""
	}
	for level := 2; level >= 0; level-- {
		if s := m.render(level, len(m.Dirs)); llm.EstimateTokens(s) <= maxTokens {
			return s
		}
	}
	// Only some folders fit: find the most by bisection.
	lo, hi := 0, len(m.Dirs)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if llm.EstimateTokens(m.render(0, mid)) <= maxTokens {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return ""
	}
	return m.render(0, lo)
}

// render prints the first n folders at a level of detail: 2 files with
// symbols, 1 files, 0 folders only.
func (m *Map) render(level, n int) string {
	var b strings.Builder
	b.WriteString(Header)
	b.WriteString("\n")
	for _, d := range m.Dirs[:n] {
		name := d.Path + "/"
		if d.Path == "." {
			name = "./"
		}
		info := append(slices.Clone(d.Package), fmt.Sprintf("%d files", len(d.Files)))
		fmt.Fprintf(&b, "%s (%s)\n", name, strings.Join(info, ", "))
		if level == 0 {
			continue
		}
		for _, f := range d.Files {
			b.WriteString("  ")
			b.WriteString(f.Path)
			if level == 2 && len(f.Symbols) > 0 {
				b.WriteString(": ")
				b.WriteString(strings.Join(f.Symbols, ", "))
			}
			b.WriteString("\n")
		}
	}
	rest := len(m.Dirs) - n
	switch {
	case rest > 0:
		fmt.Fprintf(&b, "… and %d more folders not shown\n", rest)
	case m.Truncated:
		fmt.Fprintf(&b, "… the repository has more than %d files; the first %d are listed\n", MaxFiles, MaxFiles)
	}
	return b.String()
}
