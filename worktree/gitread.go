package worktree

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/taskloom/taskloom/internal/safefile"
)

// This file reads the repository without starting git: refs and reflogs
// straight from their files, commits and history through go-git. Git
// writes them; taskloom only reads them here, so a read never races a
// writer into a half-state: git replaces a ref file by renaming its lock
// over it, and objects never change.

// errNoRef: a ref does not exist.
var errNoRef = errors.New("no such ref")

// objectStore reads commits through go-git. go-git's storage is not safe
// for concurrent use, so every read holds mu, and reads everything it needs
// from the commit (parents, message) before it lets go.
type objectStore struct {
	mu sync.Mutex
	st *filesystem.Storage
}

func newObjectStore(commonDir string) *objectStore {
	fsys := osfs.New(commonDir)
	return &objectStore{st: filesystem.NewStorageWithOptions(fsys, cache.NewObjectLRUDefault(),
		filesystem.Options{AlternatesFS: osfs.New("/")})}
}

// commitInfo is what taskloom reads of a commit.
type commitInfo struct {
	sha     string
	parents []string
	tree    string
	author  object.Signature
	message string
}

// withCommit calls f with the commit sha. When the commit is not found,
// it looks again after re-reading the pack indexes: git may have repacked
// since they were read.
func (s *objectStore) withCommit(sha string, f func(*object.Commit) error) error {
	h, ok := parseHash(sha)
	if !ok {
		return fmt.Errorf("read commit %q: %w", sha, plumbing.ErrObjectNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := object.GetCommit(s.st, h)
	if err != nil {
		s.st.Reindex()
		c, err = object.GetCommit(s.st, h)
	}
	if err != nil {
		return fmt.Errorf("read commit %s: %w", shortSHA(sha), err)
	}
	err = f(c)
	if err != nil && !errors.Is(err, errStopWalk) {
		// The walk may have met an object of a pack it had not indexed.
		s.st.Reindex()
		err = f(c)
	}
	if errors.Is(err, errStopWalk) {
		err = nil
	}
	return err
}

var errStopWalk = errors.New("stop")

// commit reads one commit.
func (s *objectStore) commit(sha string) (commitInfo, error) {
	var ci commitInfo
	err := s.withCommit(sha, func(c *object.Commit) error {
		ci = commitInfo{sha: c.Hash.String(), tree: c.TreeHash.String(), author: c.Author, message: c.Message}
		for _, p := range c.ParentHashes {
			ci.parents = append(ci.parents, p.String())
		}
		return nil
	})
	return ci, err
}

// writeCommit writes a commit object of tree on top of parent and
// returns its hash. It writes an object, never a ref.
func (s *objectStore) writeCommit(tree, parent string, author, committer object.Signature, message string) (string, error) {
	th, ok1 := parseHash(tree)
	ph, ok2 := parseHash(parent)
	if !ok1 || !ok2 {
		return "", fmt.Errorf("write commit: bad tree %q or parent %q", tree, parent)
	}
	c := &object.Commit{Author: author, Committer: committer, Message: message, TreeHash: th, ParentHashes: []plumbing.Hash{ph}}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj := s.st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return "", fmt.Errorf("write commit: %w", err)
	}
	h, err := s.st.SetEncodedObject(obj)
	if err != nil {
		return "", fmt.Errorf("write commit: %w", err)
	}
	return h.String(), nil
}

// has says whether sha is a commit of the repository.
func (s *objectStore) has(sha string) bool {
	_, err := s.commit(sha)
	return err == nil
}

// isAncestor says whether commit a is b or one of b's ancestors. found is
// false with a nil error when a is not; an error wrapping
// plumbing.ErrObjectNotFound means a or b is no commit.
func (s *objectStore) isAncestor(a, b string) (bool, error) {
	if a == b {
		_, err := s.commit(a)
		return err == nil, err
	}
	if _, err := s.commit(a); err != nil {
		return false, err
	}
	found := false
	err := s.withCommit(b, func(c *object.Commit) error {
		found = false
		return object.NewCommitPreorderIter(c, nil, nil).ForEach(func(c *object.Commit) error {
			if c.Hash.String() == a {
				found = true
				return errStopWalk
			}
			return nil
		})
	})
	return found, err
}

// walk visits head and its ancestors, newest first, until visit returns
// errStopWalk or stop says that a commit's ancestors are not wanted (they
// are not visited, unless another path leads to them).
func (s *objectStore) walk(head string, stop func(sha string) bool, visit func(commitInfo) error) error {
	return s.withCommit(head, func(c *object.Commit) error {
		seen := make(map[plumbing.Hash]bool)
		queue := []*object.Commit{c}
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			if seen[c.Hash] {
				continue
			}
			seen[c.Hash] = true
			if stop(c.Hash.String()) {
				continue
			}
			if err := visit(commitInfo{sha: c.Hash.String(), message: c.Message}); err != nil {
				return err
			}
			err := c.Parents().ForEach(func(p *object.Commit) error {
				queue = append(queue, p)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func parseHash(sha string) (plumbing.Hash, bool) {
	if len(sha) != 40 {
		return plumbing.ZeroHash, false
	}
	if _, err := hex.DecodeString(sha); err != nil {
		return plumbing.ZeroHash, false
	}
	return plumbing.NewHash(sha), true
}

// trailerValues returns the values of the key trailers of a commit
// message: the "Key: value" lines of its last paragraph. The key is
// matched without regard to case, as git does.
func trailerValues(message, key string) []string {
	msg := strings.TrimRight(message, " \t\r\n")
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 {
		// The first paragraph is the subject, never trailers.
		return nil
	}
	last := msg[i+2:]
	var out []string
	for line := range strings.SplitSeq(last, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// readRef returns the commit a ref points to, following symbolic refs:
// its loose file first, then packed-refs. A missing ref is errNoRef.
func readRef(commonDir, name string) (string, error) {
	for range 5 {
		data, err := safefile.ReadTarget(filepath.Join(commonDir, filepath.FromSlash(name)), 0)
		if errors.Is(err, fs.ErrNotExist) || isDirErr(err) {
			return packedRef(commonDir, name)
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", name, err)
		}
		v := strings.TrimSpace(string(data))
		target, sym := strings.CutPrefix(v, "ref: ")
		if !sym {
			if _, ok := parseHash(v); !ok {
				return "", fmt.Errorf("read %s: not a commit: %q", name, v)
			}
			return v, nil
		}
		name = strings.TrimSpace(target)
	}
	return "", fmt.Errorf("read %s: symbolic refs nest too deep", name)
}

func isDirErr(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "directory")
}

// packedRef looks name up in packed-refs.
func packedRef(commonDir, name string) (string, error) {
	f, err := safefile.Open(filepath.Join(commonDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", name, errNoRef)
	}
	if err != nil {
		return "", fmt.Errorf("read packed-refs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		sha, ref, ok := bytes.Cut(sc.Bytes(), []byte{' '})
		if ok && string(ref) == name {
			return string(sha), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read packed-refs: %w", err)
	}
	return "", fmt.Errorf("%s: %w", name, errNoRef)
}

// listRefs returns every ref under prefix (a folder, such as "refs/")
// with the object it points to, as for-each-ref lists them, leaving out
// those under skipPrefix. Files that are not refs (a lock, a worker's
// junk) are left out.
func listRefs(commonDir, prefix, skipPrefix string) (map[string]string, error) {
	refs := make(map[string]string)
	if data, err := safefile.ReadTarget(filepath.Join(commonDir, "packed-refs"), 0); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			sha, name, ok := strings.Cut(strings.TrimSpace(line), " ")
			if _, hash := parseHash(sha); ok && hash && strings.HasPrefix(name, prefix) &&
				(skipPrefix == "" || !strings.HasPrefix(name, skipPrefix)) {
				refs[name] = sha
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read packed-refs: %w", err)
	}
	var symbolic []string
	root := filepath.Join(commonDir, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we looked
			}
			return err
		}
		rel, _ := filepath.Rel(commonDir, path)
		name := filepath.ToSlash(rel)
		if skipPrefix != "" && strings.HasPrefix(name+"/", skipPrefix) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() || strings.HasSuffix(name, ".lock") {
			return nil
		}
		data, err := safefile.ReadTarget(path, 0)
		if err != nil {
			return nil // removed while we looked
		}
		v := strings.TrimSpace(string(data))
		if _, ok := parseHash(v); ok {
			refs[name] = v
		} else if strings.HasPrefix(v, "ref: ") {
			symbolic = append(symbolic, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list refs: %w", err)
	}
	for _, name := range symbolic {
		if sha, err := readRef(commonDir, name); err == nil {
			refs[name] = sha
		}
	}
	return refs, nil
}

// branchCreatedAt returns the commit a branch was created at: the new
// value of the oldest entry of its reflog, or "" when it has none.
func branchCreatedAt(commonDir, branch string) string {
	f, err := safefile.Open(filepath.Join(commonDir, "logs", "refs", "heads", filepath.FromSlash(branch)))
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return ""
	}
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return ""
	}
	if _, ok := parseHash(fields[1]); !ok {
		return ""
	}
	return fields[1]
}

// worktreeHead returns the commit checked out in the worktree whose admin
// folder is gitDir.
func worktreeHead(commonDir, gitDir string) (string, error) {
	data, err := safefile.ReadTarget(filepath.Join(gitDir, "HEAD"), 0)
	if err != nil {
		return "", fmt.Errorf("read HEAD: %w", err)
	}
	v := strings.TrimSpace(string(data))
	if target, ok := strings.CutPrefix(v, "ref: "); ok {
		return readRef(commonDir, strings.TrimSpace(target))
	}
	if _, ok := parseHash(v); !ok {
		return "", fmt.Errorf("read HEAD: not a commit: %q", v)
	}
	return v, nil
}

// patch returns the message of commit sha and the patch from its first
// parent to it.
func (s *objectStore) patch(sha string) (string, error) {
	var out strings.Builder
	err := s.withCommit(sha, func(c *object.Commit) error {
		out.Reset()
		out.WriteString(c.Message)
		parent, err := c.Parent(0)
		if err != nil {
			return err
		}
		p, err := parent.Patch(c)
		if err != nil {
			return err
		}
		return p.Encode(&out)
	})
	return out.String(), err
}

// MissingOnBranch returns those of paths that the head commit of branch
// in the repository at repoDir does not hold. A reviewer who says a task
// is fixed by hand must have committed its files there: a fix left
// uncommitted, or never made, would fail every task that depends on it.
func MissingOnBranch(repoDir, branch string, paths []string) ([]string, error) {
	commonDir, err := commonDirOf(repoDir)
	if err != nil {
		return nil, err
	}
	sha, err := readRef(commonDir, "refs/heads/"+branch)
	if err != nil {
		return nil, fmt.Errorf("read branch %s: %w", branch, err)
	}
	var missing []string
	err = newObjectStore(commonDir).withCommit(sha, func(c *object.Commit) error {
		tree, err := c.Tree()
		if err != nil {
			return err
		}
		for _, p := range paths {
			if _, err := tree.FindEntry(filepath.ToSlash(filepath.Clean(p))); err != nil {
				missing = append(missing, p)
			}
		}
		return nil
	})
	return missing, err
}

// commonDirOf returns the common git directory of the repository whose
// top folder is dir: its .git folder, or, in a linked worktree, the one
// its .git file leads to.
func commonDirOf(dir string) (string, error) {
	dotGit := filepath.Join(dir, ".git")
	st, err := os.Stat(dotGit)
	if err != nil {
		return "", fmt.Errorf("%s is not the top of a git repository: %w", dir, err)
	}
	if st.IsDir() {
		return dotGit, nil
	}
	data, err := safefile.ReadTarget(dotGit, 0)
	if err != nil {
		return "", err
	}
	gitDir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("%s is not a gitdir link", dotGit)
	}
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(dir, gitDir)
	}
	common, err := safefile.ReadTarget(filepath.Join(gitDir, "commondir"), 0)
	if errors.Is(err, fs.ErrNotExist) {
		return gitDir, nil
	}
	if err != nil {
		return "", err
	}
	c := strings.TrimSpace(string(common))
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitDir, c)
	}
	return filepath.Clean(c), nil
}

// A Change is a file that an attempt's commit adds, changes, renames or
// deletes. Before and After are the file's contents on each side, read
// only for the paths asked for, nil where the file is absent.
type Change struct {
	// Path is the file's path after the commit, or before it when the
	// commit deletes it.
	Path string
	// From is its path before a rename.
	From           string
	Added, Deleted bool
	Before, After  []byte
}

// maxChangeRead is the most of a file Changes reads: the files asked for
// are small configuration files.
const maxChangeRead = 1 << 20

// changes returns what commit sha changes against its first parent, exact
// and near renames found as git finds them; read says which files to read
// both sides of.
func (s *objectStore) changes(sha string, read func(path string) bool) ([]Change, error) {
	var out []Change
	err := s.withCommit(sha, func(c *object.Commit) error {
		out = out[:0]
		parent, err := c.Parent(0)
		if err != nil {
			return err
		}
		from, err := parent.Tree()
		if err != nil {
			return err
		}
		to, err := c.Tree()
		if err != nil {
			return err
		}
		chs, err := object.DiffTreeWithOptions(context.Background(), from, to, object.DefaultDiffTreeOptions)
		if err != nil {
			return err
		}
		for _, ch := range chs {
			c := Change{Path: ch.To.Name, From: ch.From.Name}
			switch {
			case ch.To.Name == "":
				c.Path, c.From, c.Deleted = ch.From.Name, "", true
			case ch.From.Name == "":
				c.From, c.Added = "", true
			case ch.From.Name == ch.To.Name:
				c.From = ""
			}
			if read(c.Path) {
				before, after, err := ch.Files()
				if err != nil {
					return err
				}
				if c.Before, err = fileBytes(before); err != nil {
					return err
				}
				if c.After, err = fileBytes(after); err != nil {
					return err
				}
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// fileBytes returns the contents of f, at most maxChangeRead bytes; nil
// for no file.
func fileBytes(f *object.File) ([]byte, error) {
	if f == nil {
		return nil, nil
	}
	r, err := f.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxChangeRead))
	if data == nil {
		data = []byte{}
	}
	return data, err
}

// Changes returns what the commit checked out in w changes against the
// commit it started from, each file once; read says which files to read
// both sides of (Change.Before, Change.After).
func (m *Manager) Changes(_ context.Context, w *Worktree, read func(path string) bool) ([]Change, error) {
	gitDir, err := m.adminDir(w.Path)
	if err != nil {
		return nil, err
	}
	head, err := worktreeHead(m.commonDir, gitDir)
	if err != nil {
		return nil, fmt.Errorf("read the commit of %s: %w", w.ID(), err)
	}
	out, err := m.objects.changes(head, read)
	if err != nil {
		return nil, fmt.Errorf("read the changes of %s: %w", w.ID(), err)
	}
	return out, nil
}
