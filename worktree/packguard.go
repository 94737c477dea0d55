package worktree

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/safefile"
)

// packFile is what the guard knows of a pack or an index in the object
// store before the worker runs.
type packFile struct {
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

// packSnapshot lists the packs and indexes of objects/pack. The worker's
// sandbox lets it add to the object store but not remove from it; it can
// still write into a file that is there (append to a pack, or write over
// it) or change its mode, which Landlock does not govern. Packs hold most
// of a repository's history, so those are checked after the worker, and
// mended where they can be.
func (m *Manager) packSnapshot() map[string]packFile {
	snap := map[string]packFile{}
	entries, err := os.ReadDir(filepath.Join(m.commonDir, "objects", "pack"))
	if err != nil {
		return snap
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext != ".pack" && ext != ".idx" {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			snap[e.Name()] = packFile{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime()}
		}
	}
	return snap
}

// fullCheckMax bounds the packs checked in full: a larger one changed in
// place is checked by its trailing checksum only, which an append or a
// cut changes, and a write into its middle does not.
const fullCheckMax = 256 << 20

// checkPacks compares the packs and indexes with snap, and checks those
// written to since against their checksums. Only damage is reported: what
// git does to a pack (freshening it by its time, a repack that writes the
// same pack again, a clone that links it, a shared repository's modes) is
// none. A pack or index the worker appended to is cut back; one it made
// unreadable gets its mode back; an index written over is rebuilt from its
// pack. It returns what it put back, and an error when a pack's content
// is damaged past mending. A file that is gone is left alone: the worker
// cannot delete one, so git did (a repack).
func (m *Manager) checkPacks(ctx context.Context, snap map[string]packFile) ([]string, error) {
	dir := filepath.Join(m.commonDir, "objects", "pack")
	var changed, damaged []string
	check := map[string]bool{} // packs to check, by path without extension
	for _, name := range slices.Sorted(maps.Keys(snap)) {
		old, path := snap[name], filepath.Join(dir, name)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if fi.Mode().Perm()&0o400 == 0 && old.mode.Perm()&0o400 != 0 {
			// Git can no longer read it.
			if err := os.Chmod(path, old.mode.Perm()); err != nil {
				damaged = append(damaged, fmt.Sprintf("objects/pack/%s was made unreadable, and its mode could not be put back: %v", name, err))
				continue
			}
			changed = append(changed, fmt.Sprintf("objects/pack/%s was made unreadable (mode %s; put back)", name, fi.Mode().Perm()))
		}
		if fi.Size() != old.size || !fi.ModTime().Equal(old.mtime) {
			check[strings.TrimSuffix(path, filepath.Ext(name))] = true
		}
	}
	for _, base := range slices.Sorted(maps.Keys(check)) {
		rel := "objects/pack/" + filepath.Base(base)
		if ok, err := packIntact(base+".pack", base+".idx"); err != nil || ok {
			continue // whole, or not readable here, which git will say
		}
		cut := false
		for _, ext := range []string{".pack", ".idx"} {
			old, ok := snap[filepath.Base(base)+ext]
			fi, err := os.Stat(base + ext)
			if !ok || err != nil || fi.Size() <= old.size {
				continue
			}
			if err := os.Truncate(base+ext, old.size); err != nil {
				damaged = append(damaged, fmt.Sprintf("%s%s was appended to, and could not be cut back: %v", rel, ext, err))
				continue
			}
			cut = true
			changed = append(changed, fmt.Sprintf("%s%s was appended to (cut back)", rel, ext))
		}
		if ok, err := packIntact(base+".pack", base+".idx"); cut && (err != nil || ok) {
			continue
		}
		if idxOnlyBad(base+".pack", base+".idx") {
			ierr := os.Remove(base + ".idx")
			if ierr == nil {
				_, ierr = m.run(ctx, gitCmd{dir: m.root, args: []string{"index-pack", base + ".pack"}})
			}
			if ierr != nil {
				damaged = append(damaged, fmt.Sprintf("%s.idx was written over, and rebuilding it failed: %v", rel, ierr))
				continue
			}
			changed = append(changed, fmt.Sprintf("%s.idx was written over (rebuilt from its pack)", rel))
			continue
		}
		damaged = append(damaged, fmt.Sprintf("%s.pack was written over", rel))
	}
	if len(damaged) > 0 {
		return changed, fmt.Errorf("%w: %s; git can no longer read the history these files hold: restore them from another clone (git fetch from it, or copy its objects/pack), then check with git fsck",
			ErrObjectsDamaged, strings.Join(damaged, "; "))
	}
	return changed, nil
}

// ErrObjectsDamaged says that the repository's object store was written
// over while a worker ran, past what taskloom can mend.
var ErrObjectsDamaged = errors.New("the repository's object store was damaged")

// packIntact reports whether a pack and its index agree with their
// checksums: the index's own, the pack's, and the pack's as the index
// records it. err reports a file it could not read.
func packIntact(pack, idx string) (bool, error) {
	ix, err := safefile.ReadTarget(idx, 0)
	if err != nil {
		return false, err
	}
	h, ok := selfSummed(ix)
	if !ok {
		return false, nil
	}
	size := h().Size()
	recorded := ix[len(ix)-2*size : len(ix)-size]
	return fileSummed(pack, h, recorded)
}

// idxOnlyBad reports whether the pack is whole (its trailing checksum is
// the hash of what precedes it) while its index is not: the index can then
// be rebuilt.
func idxOnlyBad(pack, idx string) bool {
	for _, h := range []func() hash.Hash{sha1.New, sha256.New} {
		if ok, _ := fileSummed(pack, h, nil); ok {
			ix, err := safefile.ReadTarget(idx, 0)
			_, idxOK := selfSummed(ix)
			return err != nil || !idxOK || !bytes.Contains(ix, packTrailer(pack, h().Size()))
		}
	}
	return false
}

// selfSummed returns the hash (SHA-1 or SHA-256) whose sum of data
// without its last bytes is those bytes, as git ends an index.
func selfSummed(data []byte) (func() hash.Hash, bool) {
	for _, h := range []func() hash.Hash{sha1.New, sha256.New} {
		n := h().Size()
		if len(data) < 2*n {
			continue
		}
		d := h()
		d.Write(data[:len(data)-n])
		if bytes.Equal(d.Sum(nil), data[len(data)-n:]) {
			return h, true
		}
	}
	return nil, false
}

// fileSummed reports whether the file at path ends with the hash of what
// precedes it, and, when want is set, that the hash is want.
func fileSummed(path string, h func() hash.Hash, want []byte) (bool, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	n := int64(h().Size())
	if fi.Size() < n {
		return false, nil
	}
	tail := make([]byte, n)
	if _, err := f.ReadAt(tail, fi.Size()-n); err != nil {
		return false, err
	}
	if want != nil && !bytes.Equal(tail, want) {
		return false, nil
	}
	if want != nil && fi.Size() > fullCheckMax {
		return true, nil
	}
	d := h()
	if _, err := io.CopyN(d, f, fi.Size()-n); err != nil {
		return false, err
	}
	return bytes.Equal(d.Sum(nil), tail), nil
}

// packTrailer returns the last n bytes of the file at path.
func packTrailer(path string, n int) []byte {
	f, err := safefile.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() < int64(n) {
		return nil
	}
	tail := make([]byte, n)
	if _, err := f.ReadAt(tail, fi.Size()-int64(n)); err != nil {
		return nil
	}
	return tail
}
