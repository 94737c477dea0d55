package verify

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// headTail keeps the first and the last bytes written to it.
type headTail struct {
	headLimit, tailLimit int
	head, tail           []byte
	total                int
}

func newHeadTail(headLimit, tailLimit int) *headTail {
	return &headTail{headLimit: headLimit, tailLimit: tailLimit}
}

func (b *headTail) Write(p []byte) {
	b.total += len(p)
	if n := b.headLimit - len(b.head); n > 0 {
		k := min(n, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*b.tailLimit {
		b.tail = b.tail[:copy(b.tail, b.tail[len(b.tail)-b.tailLimit:])]
	}
}

func (b *headTail) WriteString(s string) { b.Write([]byte(s)) }

func (b *headTail) Len() int { return b.total }

func (b *headTail) String() string {
	tail := b.tail
	if len(tail) > b.tailLimit {
		tail = tail[len(tail)-b.tailLimit:]
	}
	return joinElided(b.head, tail, b.total)
}

// elisionMarker stands for n bytes left out of a text.
func elisionMarker(n int) string {
	return fmt.Sprintf("\n… %d bytes elided …\n", n)
}

// joinElided joins the head and the tail of a text of total bytes with a
// marker counting what lies between them. It moves the cuts to line
// boundaries when one is near, and never splits a UTF-8 sequence.
func joinElided(head, tail []byte, total int) string {
	if len(head)+len(tail) >= total {
		return string(head) + string(tail)
	}
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 && i >= len(head)*3/4 {
		head = head[:i+1]
	}
	if len(head) > 0 {
		if i := lastRuneStart(head); !utf8.FullRune(head[i:]) {
			head = head[:i]
		}
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/4 {
		tail = tail[i+1:]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return strings.TrimSuffix(string(head), "\n") + elisionMarker(total-len(head)-len(tail)) + string(tail)
}

// lastRuneStart returns the index of the first byte of b's last rune.
func lastRuneStart(b []byte) int {
	i := len(b) - 1
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}

// trimHeadTail shortens s to about limit bytes by cutting out its middle and
// putting "… N bytes elided …" in its place. limit <= 0 means no limit.
// The result is never longer than limit unless limit is shorter than the
// marker.
func trimHeadTail(s string, limit int) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	budget := limit - len(elisionMarker(len(s)))
	if budget <= 0 {
		return strings.TrimPrefix(elisionMarker(len(s)), "\n")
	}
	h := budget / 2
	// A marker of an earlier cut in the part cut out now stands for more
	// than its own bytes: the new marker counts what it stood for.
	total := len(s)
	for _, m := range markerRE.FindAllStringSubmatchIndex(s[h:len(s)-(budget-h)], -1) {
		if n, err := strconv.Atoi(s[h+m[2] : h+m[3]]); err == nil {
			total += n - (m[1] - m[0])
		}
	}
	return joinElided([]byte(s[:h]), []byte(s[len(s)-(budget-h):]), total)
}

// markerRE matches an elisionMarker, its count as the group.
var markerRE = regexp.MustCompile(`\n… (\d+) bytes elided …\n`)

// Verify checks that each file in filesToCreate exists in dir, then runs
// the tests in dir and parses their results. The report fails when a file
// is missing (it is listed in MissingFiles), when the command times out
// (the whole process group is killed) or exits non-zero, or when a test
// fails. The tests run even when files are missing, so a retry gets both.
//

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

// stripANSI removes colour codes and other terminal escapes.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return ansiEscape.ReplaceAllString(s, "")
}

// relPaths makes the paths under dir in s relative to it: a retry runs in
// another worktree, where the first attempt's paths do not exist.
func relPaths(s, dir string) string {
	if dir == "" {
		return s
	}
	dirs := []string{filepath.Clean(dir)}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dirs[0] {
		dirs = append(dirs, real)
	}
	for _, d := range dirs {
		s = strings.ReplaceAll(s, "file://"+d+string(filepath.Separator), "")
		s = strings.ReplaceAll(s, d+string(filepath.Separator), "")
	}
	return s
}

// Stack frames that belong to the runner, not to the code under test.
var (
	// A JS frame: "    at fn (node_modules/jest-circus/build/run.js:1:2)"
	// or vitest's "❯ node_modules/@vitest/runner/dist/index.js:1:2".
	jsFrame         = regexp.MustCompile(`^\s+(?:at |❯ )`)
	jsInternalFrame = regexp.MustCompile(`node_modules[/\\]|node:internal|\(internal/|^\s+at (?:new )?Promise|^\s+at process\.processTicksAndRejections|<anonymous>\)?$`)
	// A Go frame is a function line and its tab-indented file line.
	goFuncLine    = regexp.MustCompile(`^(?:created by )?(?:testing|runtime)[./(]|^panic\(|^created by testing\.`)
	goFileLine    = regexp.MustCompile(`^\t\S+\.(?:go|s):\d+`)
	goRuntimeFile = regexp.MustCompile(`^\t\S*/(?:src|libexec/src)/(?:testing|runtime)/`)
	// A Python frame of the interpreter's or pytest's own code:
	// "/usr/lib/python3.11/importlib/__init__.py:126: in import_module"
	// and its indented source line.
	pyInternalFrame = regexp.MustCompile(`^(?:/usr/lib/python3[^/]*/|\S*(?:site|dist)-packages/(?:_pytest|pluggy)/)\S+:\d+: in `)
)

// trimFrames drops the runner's own stack frames from a failure's output:
// jest's and vitest's frames in node_modules and node's internals, the
// testing and runtime frames of a Go panic, and Python's and pytest's own
// frames. The test's own frames stay.
func trimFrames(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	dropped := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case jsFrame.MatchString(l) && jsInternalFrame.MatchString(l):
			dropped++
			continue
		case goFuncLine.MatchString(l) && i+1 < len(lines) && goRuntimeFile.MatchString(lines[i+1]):
			dropped++
			i++ // its file line
			continue
		case goFileLine.MatchString(l) && goRuntimeFile.MatchString(l):
			dropped++
			continue
		case pyInternalFrame.MatchString(l):
			dropped++
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") {
				i++ // its source line
			}
			continue
		}
		out = append(out, l)
	}
	if dropped == 0 {
		return s
	}
	return strings.Join(out, "\n")
}

// Trim shortens s to about limit bytes by cutting out its middle, where
// it says how many bytes it left out. Nodes trim the diffs they keep with
// it, as verdicts trim outputs.
func Trim(s string, limit int) string { return trimHeadTail(s, limit) }
