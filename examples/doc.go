// Package examples bundles the example projects that taskloom demo runs.
//
// textkit/ is a small Go project: project/ holds its starting files (with
// PRODUCT.md and .project-config.json; its go.mod is stored as
// go.mod.example, since go:embed leaves out folders that hold a go.mod, and
// CopyProject restores the name) and session.json the scripted model
// session that plays the breakdown and every worker conversation
// offline. Its plan auto-splits one task (T3 into T3-a and T3-b), runs two
// workers in parallel, and has one task (T2) whose first attempt fails its
// tests and whose second attempt passes.
package examples

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:embed all:textkit
var files embed.FS

// Textkit returns the textkit example: its project files and its scripted
// session.
func Textkit() (project fs.FS, session []byte, err error) {
	project, err = fs.Sub(files, "textkit/project")
	if err != nil {
		return nil, nil, err
	}
	session, err = files.ReadFile("textkit/session.json")
	return project, session, err
}

// CopyProject writes the files of project into dir, restoring the names of
// files stored with an ".example" suffix.
func CopyProject(project fs.FS, dir string) error {
	return fs.WalkDir(project, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(path, ".example")))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(project, path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
