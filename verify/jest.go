package verify

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

type jestReport struct {
	NumTotalTests   int `json:"numTotalTests"`
	NumFailedTests  int `json:"numFailedTests"`
	NumPendingTests int `json:"numPendingTests"`
	NumTodoTests    int `json:"numTodoTests"`
	TestResults     []struct {
		Name             string `json:"name"`
		Status           string `json:"status"`
		Message          string `json:"message"`
		AssertionResults []struct {
			AncestorTitles  []string `json:"ancestorTitles"`
			FullName        string   `json:"fullName"`
			Title           string   `json:"title"`
			Status          string   `json:"status"`
			FailureMessages []string `json:"failureMessages"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

// parseJestJSON parses the JSON report of jest --json or vitest
// --reporter=json (the same shape). A test is named by its describe
// blocks and its title, "outer > inner > test". A test file that failed
// to run (a syntax error, a missing module, a failing beforeAll) counts
// as one failure named "[test file failed to run]"; when the report
// carries no message for it (vitest's does not for a failing beforeAll),
// the cause is taken from the console output. File names are made
// relative to dir.
func parseJestJSON(data []byte, dir, console string) (counts, error) {
	var r jestReport
	if err := json.Unmarshal(data, &r); err != nil {
		return counts{}, fmt.Errorf("parse jest json: %w", err)
	}
	c := counts{total: r.NumTotalTests, failed: r.NumFailedTests, skipped: r.NumPendingTests + r.NumTodoTests}
	for _, file := range r.TestResults {
		pkg := file.Name
		if rel, err := filepath.Rel(dir, file.Name); err == nil && filepath.IsLocal(rel) {
			pkg = filepath.ToSlash(rel)
		}
		failedHere := 0
		for _, a := range file.AssertionResults {
			if a.Status != "failed" {
				continue
			}
			failedHere++
			name := strings.Join(append(slices.Clone(a.AncestorTitles), a.Title), " > ")
			if a.Title == "" {
				name = a.FullName
			}
			msg := stripANSI(strings.Join(a.FailureMessages, "\n"))
			if strings.TrimSpace(msg) == "" {
				msg = consoleCause(console, pkg, a.Title)
			}
			c.failures = append(c.failures, Failure{Name: name, Package: pkg, Output: strings.TrimRight(msg, "\n") + "\n"})
		}
		if failedHere == 0 && file.Status == "failed" {
			c.failed++
			msg := stripANSI(strings.TrimSpace(file.Message))
			if msg == "" {
				msg = consoleCause(console, pkg, "")
			}
			if msg == "" {
				msg = "(the report gives no cause; see the output)"
			}
			c.failures = append(c.failures, Failure{Name: "[test file failed to run]", Package: pkg, Output: msg + "\n"})
		}
	}
	return c, nil
}

// consoleSeparator is a line of vitest's console reporter between errors.
var consoleSeparator = regexp.MustCompile(`^\s*⎯{3,}`)

// consoleCause finds what the console reporter printed under the failure
// header of file (and of the test title, when given): jest's
// "● title" blocks and vitest's " FAIL  file > title" blocks.
func consoleCause(console, file, title string) string {
	lines := strings.Split(stripANSI(console), "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		isHeader := strings.HasPrefix(t, "FAIL ") && strings.Contains(t, file) && (title == "" || strings.Contains(t, title)) &&
			!strings.Contains(t, "[") // not the per-file summary line "FAIL  a.test.js [ a.test.js ]"
		if !isHeader {
			continue
		}
		var b strings.Builder
		for _, next := range lines[i+1:] {
			nt := strings.TrimSpace(next)
			if consoleSeparator.MatchString(next) || strings.HasPrefix(nt, "FAIL ") || strings.HasPrefix(nt, "Test Files ") {
				break
			}
			b.WriteString(next + "\n")
		}
		if out := strings.TrimSpace(b.String()); out != "" {
			return out
		}
	}
	return ""
}
