package crash

import (
	"os"
	"syscall"
	"testing"
)

func TestNilMap(t *testing.T) {
	if os.Getenv("SUITE_FAIL") == "" {
		return
	}
	var m map[string]int
	m["boom"] = 1
}

func TestKilled(t *testing.T) {
	if os.Getenv("SUITE_KILL") == "" {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}
