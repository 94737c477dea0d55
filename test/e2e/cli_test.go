package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Exit codes of the product contract the tests expect.
const (
	exitOK    = 0
	exitError = 1
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// buildCLI builds the taskloom binary once for the package's tests.
func buildCLI() (string, error) {
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "taskloom-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "taskloom")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/taskloom/taskloom/cmd/taskloom").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build the taskloom binary: %w: %s", err, out)
		}
	})
	return binPath, buildErr
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
