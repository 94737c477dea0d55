package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/worktree"
)

// testsWeakened returns what an attempt's commit changed of how the
// project's tests run, each as a clause of the attempt's error: taskloom's
// own config file, a test file of the branch deleted or renamed away, the
// test script of a package.json, and the Makefile that a make command runs
// the tests from. A worker that cannot make the tests pass could otherwise
// make them say so ("test": "exit 0"), and every later check on the branch
// would mean nothing. A file the task names (files_to_create,
// files_to_modify, test_files) is the task's to change. When the commit
// cannot be read, the tests decide alone.
func (p *Pipeline) testsWeakened(ctx context.Context, wt *worktree.Worktree, task planner.Task) []string {
	named := map[string]bool{}
	for _, f := range slices.Concat(task.FilesToCreate, task.FilesToModify, task.TestFiles) {
		named[path.Clean(f)] = true
	}
	isPackageJSON := func(f string) bool { return path.Base(f) == "package.json" }
	changes, err := p.Repo.Changes(ctx, wt, isPackageJSON)
	if err != nil {
		p.log().WarnContext(ctx, "cannot read what the attempt changed", "attempt", wt.ID(), "error", err)
		return nil
	}
	// The build command counts when it runs tests too ("make test"): a
	// Makefile that only builds is the task's to extend.
	commands := [][]string{p.VerifyCommand}
	if slices.ContainsFunc(p.BuildCommand, func(arg string) bool { return strings.Contains(arg, "test") }) {
		commands = append(commands, p.BuildCommand)
	}
	var out []string
	for _, c := range changes {
		was := c.Path
		if c.From != "" {
			was = c.From
		}
		switch {
		case named[c.Path] || named[was]:
		case was == config.FileName || c.Path == config.FileName:
			out = append(out, fmt.Sprintf("it changed %s, taskloom's own config, which says how tasks are verified", config.FileName))
		case !c.Added && isTestSource(was) && (c.Deleted || !isTestSource(c.Path)):
			out = append(out, fmt.Sprintf("it removed the test file %s", was))
		case isPackageJSON(c.Path) && !c.Added && !c.Deleted:
			for _, name := range npmScripts(commands, c.Before, c.After) {
				if before, after := scriptOf(c.Before, name), scriptOf(c.After, name); before != after {
					out = append(out, fmt.Sprintf("it changed the %q script of %s from %q to %q", name, c.Path, before, after))
				}
			}
		case isMakefile(path.Base(c.Path)) && slices.ContainsFunc(commands, func(argv []string) bool { return len(argv) > 0 && path.Base(argv[0]) == "make" }):
			out = append(out, fmt.Sprintf("it changed %s, from which make runs the tests", c.Path))
		}
	}
	return out
}

// npmScripts returns the package.json scripts the commands run: "test"
// always (npm test, and the command taskloom derives without one), every
// script named test-something in either version of the file ("test:unit",
// which "test" may run, "pretest"), and each script a command names with
// npm, yarn or pnpm run.
func npmScripts(commands [][]string, pkgs ...[]byte) []string {
	out := []string{"test"}
	for _, pkg := range pkgs {
		for name := range scriptsOf(pkg) {
			if strings.Contains(name, "test") && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out[1:])
	for _, argv := range commands {
		if len(argv) < 3 || !slices.Contains([]string{"npm", "yarn", "pnpm"}, path.Base(argv[0])) {
			continue
		}
		if (argv[1] == "run" || argv[1] == "run-script") && !slices.Contains(out, argv[2]) {
			out = append(out, argv[2])
		}
	}
	return out
}

// scriptOf returns the script name of a package.json's contents, "" when
// it has none or is not JSON.
func scriptOf(pkg []byte, name string) string { return scriptsOf(pkg)[name] }

// scriptsOf returns the scripts of a package.json's contents.
func scriptsOf(pkg []byte) map[string]string {
	var p struct {
		Scripts map[string]string `json:"scripts"`
	}
	if json.Unmarshal(pkg, &p) != nil {
		return nil
	}
	return p.Scripts
}

// isTestSource reports whether f is a test's source file: named as a test
// and written in a language, not a snapshot or fixture beside the tests.
func isTestSource(f string) bool {
	switch path.Ext(f) {
	case ".go", ".py", ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".rb", ".java", ".kt", ".rs", ".cs", ".php", ".swift", ".scala", ".ex", ".exs":
		return planner.IsTestFile(f)
	}
	return false
}

func isMakefile(f string) bool {
	return f == "Makefile" || f == "makefile" || f == "GNUmakefile"
}
