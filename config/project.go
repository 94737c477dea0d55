package config

import (
	"os"
	"path/filepath"
	"strings"
)

// Project is the kind of project a repo holds, as the files at its top
// say, with the commands that test and build one.
type Project struct {
	// Kind is "go", "node" or "python"; "" when no file says.
	Kind string
	// Marker is the file that says so.
	Marker string
	// Verify runs the project's tests; Build builds it (nil: the tests
	// are the build check).
	Verify, Build []string
	// Others are other commands that run the same tests, for a machine
	// where Verify cannot (pytest on the PATH, where the python3 found
	// first has no pytest module).
	Others [][]string
}

// pythonMarkers are the files that make a repo without go.mod or
// package.json a Python project.
var pythonMarkers = []string{"pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini", "requirements.txt"}

// DetectProject returns the kind of project the repo at root holds: Go
// with a go.mod or go.work, Node with a package.json, Python with one of
// its project files, looked for in that order.
func DetectProject(root string) Project {
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(root, name))
		return err == nil
	}
	for _, m := range []string{"go.mod", "go.work"} {
		if has(m) {
			return Project{Kind: "go", Marker: m, Verify: []string{"go", "test", "./..."}, Build: []string{"go", "build", "./..."}}
		}
	}
	if has("package.json") {
		return Project{Kind: "node", Marker: "package.json", Verify: []string{"npm", "test"}}
	}
	for _, m := range pythonMarkers {
		if has(m) {
			return Project{Kind: "python", Marker: m, Verify: []string{"python3", "-m", "pytest", "-q"}, Others: [][]string{{"pytest", "-q"}}}
		}
	}
	return Project{}
}

// VerifyHere returns the first of Verify and Others that works says runs
// on this machine; Verify when none does, or works is nil.
func (p Project) VerifyHere(works func(argv []string) bool) []string {
	if works == nil || p.Verify == nil || works(p.Verify) {
		return p.Verify
	}
	for _, argv := range p.Others {
		if works(argv) {
			return argv
		}
	}
	return p.Verify
}

// String names the project and the file that says so, as "a python
// project (pyproject.toml)".
func (p Project) String() string {
	if p.Kind == "" {
		return "no go.mod, package.json or Python project file"
	}
	return "a " + p.Kind + " project (" + p.Marker + ")"
}

// GoWithoutModule reports whether argv runs the go command in a repo at
// root that has no go.mod or go.work there, where `go test ./...` and
// `go build ./...` fail before any test runs.
func GoWithoutModule(root string, argv []string) bool {
	if len(argv) == 0 || strings.TrimSuffix(filepath.Base(argv[0]), ".exe") != "go" {
		return false
	}
	return DetectProject(root).Kind != "go"
}
