package agent

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	markerSearch  = "<<<<<<< SEARCH"
	markerDivider = "======="
	markerReplace = ">>>>>>> REPLACE"
	markerSep     = "-------"
)

// diffBlock is one SEARCH/REPLACE block.
type diffBlock struct {
	search    []string
	replace   []string
	startLine int // 1-based hint, 0 when absent
}

// parseDiff reads Roo-Code's SEARCH/REPLACE format:
//
//	<<<<<<< SEARCH
//	:start_line:12
//	-------
//	old lines
//	=======
//	new lines
//	>>>>>>> REPLACE
//
// The :start_line: and ------- lines are optional.
func parseDiff(diff string) ([]diffBlock, error) {
	lines := strings.Split(strings.ReplaceAll(diff, "\r\n", "\n"), "\n")
	var blocks []diffBlock
	const (
		outside = iota
		inSearch
		inReplace
	)
	state := outside
	var cur diffBlock
	headerLines := 0
	for i, raw := range lines {
		line := strings.TrimRight(raw, " \t")
		switch state {
		case outside:
			if line == markerSearch {
				state, cur, headerLines = inSearch, diffBlock{}, 0
				continue
			}
			if strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("line %d: text outside a SEARCH/REPLACE block: %q", i+1, shorten(raw, 60))
			}
		case inSearch:
			if headerLines == 0 && len(cur.search) == 0 && strings.HasPrefix(line, ":start_line:") {
				n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, ":start_line:")))
				if err != nil || n < 1 {
					return nil, fmt.Errorf("line %d: bad :start_line: %q", i+1, line)
				}
				cur.startLine = n
				headerLines++
				continue
			}
			if len(cur.search) == 0 && line == markerSep && headerLines < 2 {
				headerLines = 2
				continue
			}
			if line == markerDivider {
				state = inReplace
				continue
			}
			if line == markerSearch || line == markerReplace {
				return nil, fmt.Errorf("line %d: %q inside a SEARCH section (missing %q)", i+1, line, markerDivider)
			}
			headerLines = 2
			cur.search = append(cur.search, raw)
		case inReplace:
			if line == markerReplace {
				blocks = append(blocks, cur)
				state = outside
				continue
			}
			if line == markerSearch || line == markerDivider {
				return nil, fmt.Errorf("line %d: %q inside a REPLACE section (missing %q)", i+1, line, markerReplace)
			}
			cur.replace = append(cur.replace, raw)
		}
	}
	if state != outside {
		return nil, fmt.Errorf("unterminated block: missing %q", map[int]string{inSearch: markerDivider, inReplace: markerReplace}[state])
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("no SEARCH/REPLACE block found (a block starts with %q)", markerSearch)
	}
	return blocks, nil
}

// applyDiff applies every block to content in order, or none: it returns
// an error naming the first block that does not apply.
func applyDiff(content, diff string) (string, int, error) {
	blocks, err := parseDiff(diff)
	if err != nil {
		return "", 0, err
	}
	crlf := strings.Contains(content, "\r\n")
	if crlf {
		content = strings.ReplaceAll(content, "\r\n", "\n")
	}
	lines := strings.Split(content, "\n")
	for bi, b := range blocks {
		if len(b.search) == 0 || (len(b.search) == 1 && strings.TrimSpace(b.search[0]) == "") {
			return "", 0, fmt.Errorf("block %d: the SEARCH section is empty; use write_to_file to create or rewrite a file", bi+1)
		}
		at, err := findBlock(lines, b)
		if err != nil {
			return "", 0, fmt.Errorf("block %d: %w", bi+1, err)
		}
		next := make([]string, 0, len(lines)-len(b.search)+len(b.replace))
		next = append(next, lines[:at]...)
		next = append(next, b.replace...)
		next = append(next, lines[at+len(b.search):]...)
		lines = next
	}
	out := strings.Join(lines, "\n")
	if crlf {
		out = strings.ReplaceAll(out, "\n", "\r\n")
	}
	return out, len(blocks), nil
}

// findBlock returns the line index where b.search matches: exactly, or
// else ignoring trailing whitespace. Several matches need start_line to
// choose; the nearest one wins.
func findBlock(lines []string, b diffBlock) (int, error) {
	for _, loose := range []bool{false, true} {
		var hits []int
		for i := 0; i+len(b.search) <= len(lines); i++ {
			if linesEqual(lines[i:i+len(b.search)], b.search, loose) {
				hits = append(hits, i)
			}
		}
		switch {
		case len(hits) == 1:
			return hits[0], nil
		case len(hits) > 1:
			if b.startLine == 0 {
				var at []string
				for _, h := range hits {
					at = append(at, strconv.Itoa(h+1))
				}
				return 0, fmt.Errorf("the SEARCH text matches %d places (lines %s); add :start_line: to choose one", len(hits), strings.Join(at, ", "))
			}
			best := hits[0]
			for _, h := range hits[1:] {
				if abs(h+1-b.startLine) < abs(best+1-b.startLine) {
					best = h
				}
			}
			return best, nil
		}
	}
	return 0, fmt.Errorf("the SEARCH text does not match the file; read the file again and copy the lines exactly, including indentation")
}

func linesEqual(a, b []string, loose bool) bool {
	for i := range a {
		x, y := a[i], b[i]
		if loose {
			x, y = strings.TrimRight(x, " \t"), strings.TrimRight(y, " \t")
		}
		if x != y {
			return false
		}
	}
	return true
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
