//go:build !linux

package worktree

import (
	"io/fs"
	"time"
)

// changeTime returns fi's modification time where the change time is not
// read: the worker sandbox that needs it is Linux's.
func changeTime(fi fs.FileInfo) time.Time { return fi.ModTime() }
