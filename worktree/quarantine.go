package worktree

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The objects that git writes for a worker (its commits, the blobs of its
// git add) go to a quarantine folder of the attempt's own, not to the
// repository's object store, which the sandbox keeps read-only. A worker
// that could write the store could rewrite the objects of the user's
// history in place: Landlock cannot tell a new file from a rewritten one.
// The pipeline then adopts the quarantined objects into the store, each
// checked against its name and none replacing one already there, as git's
// receive-pack does with the objects of a push.

// quarantineName is the quarantine's folder in the attempt's git admin
// folder, which the worker can write anyway.
const quarantineName = "taskloom-objects"

func quarantineDir(gitDir string) string { return filepath.Join(gitDir, quarantineName) }

// quarantineEnv points git at the quarantine for the objects it writes,
// and at the repository's store for the ones it reads.
func quarantineEnv(gitDir, commonDir string) []string {
	return []string{
		"GIT_OBJECT_DIRECTORY=" + quarantineDir(gitDir),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(commonDir, "objects"),
	}
}

// quarantineEnvAt is quarantineEnv for the worktree at dir when it has a
// quarantine, read from its .git link, else nil: taskloom's own git reads
// in a worktree during the attempt (the Ralph loop's diff) must see the
// objects the worker wrote.
func quarantineEnvAt(dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	gitDir, ok := strings.CutPrefix(line, "gitdir: ")
	if !ok {
		return nil
	}
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(dir, gitDir)
	}
	if st, err := os.Stat(quarantineDir(gitDir)); err != nil || !st.IsDir() {
		return nil
	}
	common, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	if err != nil {
		return nil
	}
	commonDir := strings.TrimSpace(string(common))
	if !filepath.IsAbs(commonDir) {
		commonDir = filepath.Join(gitDir, commonDir)
	}
	return quarantineEnv(gitDir, filepath.Clean(commonDir))
}

// adoptObjects moves what the quarantine of the worktree whose admin
// folder is gitDir holds into the repository's store, and empties it. A
// loose object goes in when its content has its name; a pack goes through
// git index-pack --strict, which checks every object in it. An object the
// store has already stays as it is. refused names what was left out.
func (m *Manager) adoptObjects(ctx context.Context, gitDir string) (refused []string, err error) {
	q := quarantineDir(gitDir)
	entries, err := os.ReadDir(q)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the quarantine %s: %w", q, err)
	}
	store := filepath.Join(m.commonDir, "objects")
	for _, e := range entries {
		switch name := e.Name(); {
		case e.IsDir() && len(name) == 2 && isHex(name):
			files, err := os.ReadDir(filepath.Join(q, name))
			if err != nil {
				return refused, err
			}
			for _, f := range files {
				id := name + f.Name()
				if len(id) != 40 || !isHex(id) {
					continue // git's temporary files, never finished
				}
				if err := adoptLoose(filepath.Join(q, name, f.Name()), store, id); err != nil {
					refused = append(refused, fmt.Sprintf("object %s (%v)", shortSHA(id), err))
				}
			}
		case name == "pack":
			packs, _ := filepath.Glob(filepath.Join(q, "pack", "*.pack"))
			for _, p := range packs {
				data, err := os.ReadFile(p)
				if err == nil {
					_, err = m.run(ctx, gitCmd{dir: m.root, args: []string{"index-pack", "--stdin", "--strict"}, stdin: string(data)})
				}
				if err != nil {
					refused = append(refused, fmt.Sprintf("pack %s (%v)", filepath.Base(p), err))
				}
			}
		}
	}
	if len(refused) > 0 {
		m.logger.WarnContext(ctx, "objects a worker's git wrote were left out", slog.Any("refused", refused))
	}
	if err := os.RemoveAll(q); err != nil {
		return refused, fmt.Errorf("empty the quarantine %s: %w", q, err)
	}
	return refused, os.Mkdir(q, 0o755)
}

// adoptLoose puts the loose object at path into store as id, once its
// content is checked to hash to id. It never replaces a file there: the
// object goes to a temporary name first and is then linked in, which
// fails when id exists.
func adoptLoose(path, store, id string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := checkLoose(data, id); err != nil {
		return err
	}
	dir := filepath.Join(store, id[:2])
	dest := filepath.Join(dir, id[2:])
	if _, err := os.Lstat(dest); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close(), os.Chmod(tmp.Name(), 0o444)); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), dest); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// checkLoose checks that data, a zlib-compressed loose object, is a
// well-formed object whose SHA-1 is id.
func checkLoose(data []byte, id string) error {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an object: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 1<<31))
	if err != nil {
		return fmt.Errorf("not an object: %w", err)
	}
	header, body, ok := bytes.Cut(raw, []byte{0})
	typ, size, _ := strings.Cut(string(header), " ")
	n, serr := strconv.Atoi(size)
	switch {
	case !ok || serr != nil || n != len(body):
		return errors.New("not an object: its header is wrong")
	case typ != "blob" && typ != "tree" && typ != "commit" && typ != "tag":
		return fmt.Errorf("not an object: type %q", typ)
	}
	sum := sha1.Sum(raw)
	if hex.EncodeToString(sum[:]) != id {
		return errors.New("its content does not have its name")
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
