package worktree

import (
	"io/fs"
	"syscall"
	"time"
)

// changeTime returns the file's status change time, which no write, mode
// change or time change can leave as it was.
func changeTime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Unix())
	}
	return time.Time{}
}
