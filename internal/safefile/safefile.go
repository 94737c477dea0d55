// Package safefile reads and writes files that a sandboxed worker or a
// test could have put in place. A named pipe there would hold the reader
// (and with it the whole run) until someone writes to it, a socket or a
// device is not a file at all, and a sparse file of many gigabytes would
// be read into memory whole. Each is refused with an error that names it,
// before anything is read or written.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular means the path names something other than a regular file:
// a named pipe, a socket, a device or a folder.
var ErrNotRegular = errors.New("is not a regular file")

// TooLargeError is a file over the size a caller reads whole.
type TooLargeError struct {
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("is %d bytes, over the %d bytes read at once", e.Size, e.Limit)
}

// kind names what a non-regular file is, for the error.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

func notRegular(path string, m fs.FileMode) error {
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(m))}
}

// open opens path with flag, refusing anything but a regular file: the
// open itself does not wait on a pipe, and the file opened is checked, not
// the name, so a swap between a check and the open changes nothing. With
// follow, a symlink is followed to a regular file; without, it is refused.
func open(path string, flag int, perm fs.FileMode, follow bool) (*os.File, fs.FileInfo, error) {
	stat, flags := os.Lstat, flag|openFlags|noFollow
	if follow {
		stat, flags = os.Stat, flag|openFlags
	}
	if st, err := stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, nil, notRegular(path, st.Mode())
	}
	f, err := os.OpenFile(path, flags, perm)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(path, st.Mode())
	}
	if err := blocking(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// Open opens the regular file at path, or at the end of the symlinks path
// names, for reading.
func Open(path string) (*os.File, error) {
	f, _, err := open(path, os.O_RDONLY, 0, true)
	return f, err
}

// ReadFile reads the regular file at path whole, refusing a symlink and a
// file over limit bytes (limit <= 0 means no limit).
func ReadFile(path string, limit int64) ([]byte, error) {
	return read(path, limit, false)
}

// ReadTarget is ReadFile for a path that may be a symlink to a regular
// file, as git's own files in a repository may be.
func ReadTarget(path string, limit int64) ([]byte, error) {
	return read(path, limit, true)
}

func read(path string, limit int64, follow bool) ([]byte, error) {
	f, st, err := open(path, os.O_RDONLY, 0, follow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if limit > 0 && st.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: st.Size(), Limit: limit}}
	}
	r := io.Reader(f)
	if limit > 0 {
		// A file that grows while it is read stops at the limit.
		r = io.LimitReader(f, limit+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: int64(len(data)), Limit: limit}}
	}
	return data, nil
}

// WriteFile writes data to path, creating it with perm or truncating it,
// refusing a path that names a symlink or anything but a regular file.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, _, err := open(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm, false)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
