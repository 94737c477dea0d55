package planner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// maxSourceBytes bounds how much of one file the import reader parses; a
// larger file is read up to that size (Go files that fail to parse whole
// give no imports).
const maxSourceBytes = 1 << 20

// repoIndex reads, from the files that exist in a repository, which files
// of a task import which and what symbols they define. Go packages are
// read with go/parser, Python's import and from statements and TS/JS's
// import, export … from and require calls with patterns. Everything is
// cached: one repoIndex serves one Build.
type repoIndex struct {
	dir string
	// goPkgs maps a repo-relative directory to the repo-relative
	// directories its Go files import (only the repo's own packages).
	goPkgs map[string]map[string]bool
	// goMods maps a directory to the module (directory and path) that
	// contains it.
	goMods map[string]goModule
	// imports maps a Python or TS/JS file to the repo-relative files it may
	// import (every candidate an import resolves to).
	imports map[string]map[string]bool
	// symbols maps a file to the top-level names it defines.
	symbols map[string][]string
}

type goModule struct{ dir, path string }

func newRepoIndex(dir string) *repoIndex {
	if dir == "" {
		return nil
	}
	return &repoIndex{dir: dir, goPkgs: map[string]map[string]bool{}, goMods: map[string]goModule{},
		imports: map[string]map[string]bool{}, symbols: map[string][]string{}}
}

// read returns up to maxSourceBytes of the repo-relative file f, or nil
// when it does not exist (or cannot be read, or leaves the repository).
func (ix *repoIndex) read(f string) []byte {
	if f == "" || f == ".." || strings.HasPrefix(f, "../") || path.IsAbs(f) {
		return nil
	}
	fh, err := os.Open(filepath.Join(ix.dir, filepath.FromSlash(f)))
	if err != nil {
		return nil
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	src, err := io.ReadAll(io.LimitReader(fh, maxSourceBytes))
	if err != nil {
		return nil
	}
	return src
}

// importsFile reports whether task file from imports task file to, as far as
// the repository shows: a Go file imports the packages its package imports
// (so a new file in an existing package counts too); a Python or TS/JS file
// must exist to be read.
func (ix *repoIndex) importsFile(from, to string) bool {
	if ix == nil || from == to {
		return false
	}
	if strings.HasSuffix(from, ".go") && strings.HasSuffix(to, ".go") {
		fd, td := path.Dir(from), path.Dir(to)
		return fd != td && ix.goPackage(fd)[td]
	}
	return ix.fileImports(from)[to]
}

// goPackage returns the repo-relative directories the Go files of dir
// import, and records their exported symbols.
func (ix *repoIndex) goPackage(dir string) map[string]bool {
	if m, ok := ix.goPkgs[dir]; ok {
		return m
	}
	m := map[string]bool{}
	ix.goPkgs[dir] = m
	entries, err := os.ReadDir(filepath.Join(ix.dir, filepath.FromSlash(dir)))
	if err != nil {
		return m
	}
	mod := ix.goModule(dir)
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		rel := path.Join(dir, name)
		src := ix.read(rel)
		if src == nil {
			continue
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, is := range f.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			if err != nil || mod.path == "" {
				continue
			}
			if p == mod.path || strings.HasPrefix(p, mod.path+"/") {
				m[path.Join(mod.dir, strings.TrimPrefix(strings.TrimPrefix(p, mod.path), "/"))] = true
			}
		}
		ix.symbols[rel] = goSymbols(f)
	}
	return m
}

// goSymbols returns the exported top-level names of a Go file.
func goSymbols(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				out = append(out, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

var goModuleLine = regexp.MustCompile(`(?m)^module\s+"?([^\s"]+)"?\s*$`)

// goModule finds the go.mod nearest above dir.
func (ix *repoIndex) goModule(dir string) goModule {
	if m, ok := ix.goMods[dir]; ok {
		return m
	}
	var m goModule
	if src := ix.read(path.Join(dir, "go.mod")); src != nil {
		if sm := goModuleLine.FindSubmatch(src); sm != nil {
			m = goModule{dir: dir, path: string(sm[1])}
		}
	} else if dir != "." {
		m = ix.goModule(path.Dir(dir))
	}
	ix.goMods[dir] = m
	return m
}

var (
	pyImport = regexp.MustCompile(`(?m)^[ \t]*import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)`)
	pyFrom   = regexp.MustCompile(`(?m)^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([\w\t ,]+)`)
	pySymbol = regexp.MustCompile(`(?m)^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)`)
	jsImport = regexp.MustCompile(`(?:\bfrom|\bimport|\brequire[ \t]*\(|\bimport[ \t]*\()[ \t]*['"]([^'"\n]+)['"]`)
	jsSymbol = regexp.MustCompile(`(?m)^[ \t]*export[ \t]+(?:default[ \t]+)?(?:async[ \t]+)?(?:function\*?|class|const|let|var|interface|type|enum)[ \t]+(\w+)`)
)

// pyRoots are the directories Python's absolute imports are looked up
// from, besides the repository root.
var pyRoots = []string{".", "src"}

// jsExts are the extensions an extensionless TS/JS import may have.
var jsExts = []string{".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"}

// fileImports returns the repo-relative files a Python or TS/JS file may
// import, and records its symbols.
func (ix *repoIndex) fileImports(f string) map[string]bool {
	if m, ok := ix.imports[f]; ok {
		return m
	}
	m := map[string]bool{}
	ix.imports[f] = m
	ext := path.Ext(f)
	isPy := ext == ".py"
	isJS := false
	for _, e := range jsExts {
		isJS = isJS || e == ext
	}
	if !isPy && !isJS {
		return m
	}
	src := ix.read(f)
	if src == nil {
		return m
	}
	if isPy {
		pyImports(f, src, m)
		for _, s := range pySymbol.FindAllSubmatch(src, -1) {
			ix.symbols[f] = append(ix.symbols[f], string(s[1]))
		}
		return m
	}
	for _, s := range jsImport.FindAllSubmatch(src, -1) {
		jsResolve(path.Dir(f), string(s[1]), m)
	}
	for _, s := range jsSymbol.FindAllSubmatch(src, -1) {
		ix.symbols[f] = append(ix.symbols[f], string(s[1]))
	}
	return m
}

// pyImports adds the candidate files of every import of a Python file.
func pyImports(f string, src []byte, m map[string]bool) {
	addModule := func(base, mod string) {
		p := path.Join(base, strings.ReplaceAll(mod, ".", "/"))
		m[p+".py"] = true
		m[path.Join(p, "__init__.py")] = true
	}
	for _, s := range pyImport.FindAllSubmatch(src, -1) {
		for _, part := range strings.Split(string(s[1]), ",") {
			mod := strings.Fields(part)[0]
			for _, root := range pyRoots {
				addModule(root, mod)
			}
		}
	}
	for _, s := range pyFrom.FindAllSubmatch(src, -1) {
		mod := string(s[1])
		var bases []string
		if dots := len(mod) - len(strings.TrimLeft(mod, ".")); dots > 0 {
			base := path.Dir(f)
			for range dots - 1 {
				base = path.Dir(base)
			}
			bases, mod = []string{base}, mod[dots:]
		} else {
			bases = pyRoots
		}
		names := strings.FieldsFunc(string(s[2]), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		for _, base := range bases {
			if mod != "" {
				addModule(base, mod)
			}
			// "from pkg import name" may import the module pkg/name.py.
			for i, n := range names {
				if n == "as" || (i > 0 && names[i-1] == "as") {
					continue
				}
				addModule(base, strings.Trim(mod+"."+n, "."))
			}
		}
	}
}

// jsResolve adds the files a TS/JS module specifier may name: relative
// specifiers against the importing file's directory, "@/x" and "~/x"
// against src/ (the usual alias), with or without an extension, or a
// directory's index file. Package imports name no repository file.
func jsResolve(dir, spec string, m map[string]bool) {
	var p string
	switch {
	case strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../"):
		p = path.Join(dir, spec)
	case strings.HasPrefix(spec, "@/") || strings.HasPrefix(spec, "~/"):
		p = path.Join("src", spec[2:])
	default:
		return
	}
	m[p] = true
	// TypeScript's ESM style imports "./x.js" for x.ts.
	stemmed := strings.TrimSuffix(strings.TrimSuffix(p, ".js"), ".jsx")
	for _, e := range jsExts {
		m[stemmed+e] = true
		m[path.Join(p, "index"+e)] = true
	}
}

// symbolsOf returns the top-level names a file of the repository defines
// (after its imports were read).
func (ix *repoIndex) symbolsOf(f string) []string {
	if ix == nil {
		return nil
	}
	if strings.HasSuffix(f, ".go") {
		ix.goPackage(path.Dir(f))
	} else {
		ix.fileImports(f)
	}
	return ix.symbols[f]
}
