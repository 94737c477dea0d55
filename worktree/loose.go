package worktree

import (
	"bufio"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/safefile"
)

// looseSnap is what the guard knows of the loose objects before the
// worker runs: when it looked, and when each fan-out folder of objects/
// last changed.
//
// The worker may add objects, as its commits must. A file it adds under
// the name of an object that does not exist yet, with other content, would
// be taken by git for that object as soon as anyone writes the same
// content: git does not write an object that is already there, so the
// user's later commits would point at garbage. Adding a file changes its
// folder, so only the folders that changed are read, and only their files
// that changed since the snapshot are checked: a repository with many
// loose objects costs a stat of each folder, not of each object.
type looseSnap struct {
	at   time.Time
	dirs map[string]time.Time
}

func (m *Manager) looseSnapshot() looseSnap {
	snap := looseSnap{at: time.Now(), dirs: map[string]time.Time{}}
	for _, name := range fanout(filepath.Join(m.commonDir, "objects")) {
		if fi, err := os.Lstat(filepath.Join(m.commonDir, "objects", name)); err == nil {
			snap.dirs[name] = changeTime(fi)
		}
	}
	return snap
}

// fanout lists the two-hex-digit folders of an objects folder.
func fanout(objects string) []string {
	entries, err := os.ReadDir(objects)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); len(n) == 2 && e.IsDir() && isHex(n) {
			out = append(out, n)
		}
	}
	return out
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// timeSlack allows for a file system whose times tick more coarsely than
// the clock: a file written just after the snapshot may carry a time just
// before it.
const timeSlack = time.Second

// checkLoose checks the loose objects written since snap against their
// names, and removes each whose content is not its name's object. It
// returns what it removed, and an error naming one it could not remove.
func (m *Manager) checkLoose(snap looseSnap) ([]string, error) {
	objects := filepath.Join(m.commonDir, "objects")
	var removed, stuck []string
	since := snap.at.Add(-timeSlack)
	for _, dir := range fanout(objects) {
		fi, err := os.Lstat(filepath.Join(objects, dir))
		if err != nil {
			continue
		}
		if was, ok := snap.dirs[dir]; ok && changeTime(fi).Equal(was) {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(objects, dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := dir + e.Name()
			if (len(name) != sha1.Size*2 && len(name) != sha256.Size*2) || !isHex(name) {
				continue // git's temporary files, or not git's
			}
			path := filepath.Join(objects, dir, e.Name())
			fi, err := os.Lstat(path)
			if err != nil || changeTime(fi).Before(since) {
				continue
			}
			// Git writes objects as files; a link there would make the
			// object whatever its target becomes.
			if fi.Mode().IsRegular() && looseIntact(path, name) {
				continue
			}
			if err := os.Remove(path); errors.Is(err, fs.ErrNotExist) {
				continue // git's housekeeping took it meanwhile
			} else if err != nil {
				stuck = append(stuck, fmt.Sprintf("objects/%s/%s is not the object its name says, and could not be removed: %v", dir, e.Name(), err))
				continue
			}
			removed = append(removed, fmt.Sprintf("objects/%s/%s was written with content that is not the object its name says (removed)", dir, e.Name()))
		}
	}
	slices.Sort(removed)
	if len(stuck) > 0 {
		return removed, fmt.Errorf("%w: %s; remove it by hand, then check with git fsck", ErrObjectsDamaged, strings.Join(stuck, "; "))
	}
	return removed, nil
}

// looseIntact reports whether the loose object file at path holds the
// object name: zlib-compressed "type size\0content" whose hash is name.
// Anything else in its place (not a regular file, one git cannot read,
// not zlib, a wrong size, another hash) is not intact. A file that went
// away, or that could not be opened for a reason of this process's (too
// many open files), is not judged.
func looseIntact(path, name string) bool {
	f, err := safefile.Open(path)
	if err != nil {
		return !errors.Is(err, fs.ErrPermission) && !errors.Is(err, safefile.ErrNotRegular)
	}
	defer f.Close()
	z, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return false
	}
	defer z.Close()
	br := bufio.NewReader(z)
	header, err := br.ReadString(0)
	if err != nil {
		return false
	}
	kind, size, ok := strings.Cut(strings.TrimSuffix(header, "\x00"), " ")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil || n < 0 || !slices.Contains([]string{"blob", "tree", "commit", "tag"}, kind) {
		return false
	}
	var h hash.Hash = sha1.New()
	if len(name) == sha256.Size*2 {
		h = sha256.New()
	}
	h.Write([]byte(header))
	copied, err := io.Copy(h, br)
	if err != nil || copied != n {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == name
}
