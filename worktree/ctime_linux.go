package worktree

import (
	"io/fs"
	"syscall"
	"time"
)

// changeTime returns when fi's inode last changed. Unlike the modification
// time, which anyone who may write a file can set, it moves with every
// write, rename and mode change, and cannot be set back.
func changeTime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Unix())
	}
	return fi.ModTime()
}
