package e2e

import (
	"os"
	"testing"

	"github.com/taskloom/taskloom/internal/testkit"
)

// Exit codes of the product contract the tests expect.
const (
	exitOK    = 0
	exitError = 1
)

// taskloomBin is the taskloom binary the package's tests run, built once.
var taskloomBin = testkit.Binary{Pkg: "github.com/taskloom/taskloom/cmd/taskloom"}

func TestMain(m *testing.M) {
	code := m.Run()
	taskloomBin.Remove()
	os.Exit(code)
}
