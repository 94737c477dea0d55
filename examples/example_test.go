package examples_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/taskloom/taskloom/examples"
)

// ExampleCopyProject copies the textkit example into a folder.
func ExampleCopyProject() {
	project, session, err := examples.Textkit()
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "textkit")
	defer os.RemoveAll(dir)
	if err := examples.CopyProject(project, dir); err != nil {
		panic(err)
	}
	var files []string
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if !info.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(files)
	fmt.Println(files, len(session) > 0)
	// Output:
	// [.project-config.json PRODUCT.md README.md go.mod textkit/doc.go] true
}
