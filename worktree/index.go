package worktree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/taskloom/taskloom/internal/safefile"
)

// indexEntry is what removeUntracked needs of an index entry.
type indexEntry struct {
	name      string // slash-separated
	submodule bool
}

// readIndexNames returns the entries of the git index at path. Reusing a
// worktree reads its index twice per task, and go-git's decoder spends
// microseconds on each entry (it decodes every field by reflection and
// hashes the whole file), which adds up to milliseconds per task as the
// repository grows. So the names and modes are read directly; an index
// this reader does not follow (a SHA-256 repository, a sparse index, a
// damaged file) goes to go-git's decoder, which checks everything.
func readIndexNames(path string) ([]indexEntry, error) {
	data, err := safefile.ReadTarget(path, 0)
	if err != nil {
		return nil, err
	}
	if entries, err := parseIndexNames(data); err == nil {
		return entries, nil
	}
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(data)).Decode(&idx); err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	entries := make([]indexEntry, len(idx.Entries))
	for i, e := range idx.Entries {
		entries[i] = indexEntry{name: e.Name, submodule: e.Mode == filemode.Submodule}
	}
	return entries, nil
}

var errIndexFormat = errors.New("index not in the format read directly")

// Index entry layout (gitformat-index): ten 32-bit fields (ctime, mtime,
// dev, ino, mode, uid, gid, size), the object name, 16 bits of flags,
// 16 more when the extended flag is set (version 3 and up), then the path.
const (
	indexFixed     = 40 + 20 + 2 // SHA-1 object names
	indexModeAt    = 24
	flagExtended   = 0x4000
	flagNameMask   = 0x0fff
	modeTypeMask   = 0o170000
	modeGitlink    = 0o160000
	modeSparseDir  = 0o040000
	indexHeaderLen = 12
)

// parseIndexNames reads the entries of an index of version 2, 3 or 4 in a
// SHA-1 repository, checking the layout as it goes.
func parseIndexNames(data []byte) ([]indexEntry, error) {
	if len(data) < indexHeaderLen || string(data[:4]) != "DIRC" {
		return nil, errIndexFormat
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, errIndexFormat
	}
	count := binary.BigEndian.Uint32(data[8:12])
	if uint64(count)*indexFixed > uint64(len(data)) {
		return nil, errIndexFormat
	}
	entries := make([]indexEntry, 0, count)
	off := indexHeaderLen
	var prev string
	for range count {
		start := off
		if off+indexFixed > len(data) {
			return nil, errIndexFormat
		}
		mode := binary.BigEndian.Uint32(data[off+indexModeAt:])
		flags := binary.BigEndian.Uint16(data[off+indexFixed-2:])
		off += indexFixed
		if flags&flagExtended != 0 {
			if version < 3 || off+2 > len(data) {
				return nil, errIndexFormat
			}
			off += 2
		}
		if mode&modeTypeMask == modeSparseDir {
			return nil, errIndexFormat
		}
		var name string
		if version == 4 {
			strip, n := offsetVarint(data[off:])
			if n <= 0 || strip > uint64(len(prev)) {
				return nil, errIndexFormat
			}
			off += n
			end := bytes.IndexByte(data[off:], 0)
			if end < 0 {
				return nil, errIndexFormat
			}
			name = prev[:len(prev)-int(strip)] + string(data[off:off+end])
			off += end + 1
		} else {
			end := bytes.IndexByte(data[off:], 0)
			if end < 0 {
				return nil, errIndexFormat
			}
			name = string(data[off : off+end])
			// NULs pad the entry to a multiple of 8 bytes, at least one.
			off = start + (off+end-start+8)&^7
			if off > len(data) {
				return nil, errIndexFormat
			}
		}
		if n := int(flags & flagNameMask); n != len(name) && !(n == flagNameMask && len(name) >= flagNameMask) || name == "" {
			return nil, errIndexFormat
		}
		entries = append(entries, indexEntry{name: name, submodule: mode&modeTypeMask == modeGitlink})
		prev = name
	}
	return entries, nil
}

// offsetVarint decodes git's varint of version 4 indexes (varint.c): seven
// bits a byte, most significant first, each continuation adding one. It
// returns the value and the bytes read, or n <= 0.
func offsetVarint(b []byte) (v uint64, n int) {
	for i, c := range b {
		if i == 9 {
			return 0, -1
		}
		if i > 0 {
			v++
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
