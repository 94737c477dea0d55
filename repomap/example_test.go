package repomap_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/taskloom/taskloom/repomap"
)

func Example() {
	dir, _ := os.MkdirTemp("", "repomap")
	defer os.RemoveAll(dir)
	_ = os.MkdirAll(filepath.Join(dir, "textkit"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/textkit\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "textkit", "count.go"),
		[]byte("package textkit\n\n// WordCount counts words.\nfunc WordCount(s string) int { return 0 }\n"), 0o644)

	m, err := repomap.Build(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(m.Render(500))
	// Output:
	// Repository map (the files that exist now; plan against them, modify rather than re-create):
	// ./ (go module example.com/textkit, 1 files)
	//   go.mod
	// textkit/ (go package textkit, 1 files)
	//   count.go: WordCount
}
