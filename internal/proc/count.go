package proc

import (
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// started counts the subprocesses Run started, by program name.
var started sync.Map // program base name -> *atomic.Int64

// countStart records that a subprocess of program name started.
func countStart(name string) {
	name = strings.TrimSuffix(filepath.Base(name), ".exe")
	c, ok := started.Load(name)
	if !ok {
		c, _ = started.LoadOrStore(name, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// Started returns how many subprocesses of the program name ("git") Run
// has started in this process. Benchmarks read it to report how many git
// commands a task costs.
func Started(name string) int64 {
	if c, ok := started.Load(name); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}
