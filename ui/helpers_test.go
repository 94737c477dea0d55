package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/ui"
)

// Exit codes of the product contract.
const (
	exitOK     = 0
	exitReview = 3
)

// taskloomBin is the taskloom binary the package's tests run: the runs the
// page shows are driven by other processes, as a user's are.
var taskloomBin = testkit.Binary{Pkg: "github.com/taskloom/taskloom/cmd/taskloom"}

// taskloom returns the taskloom binary, built on first use.
func taskloom(t *testing.T) string {
	t.Helper()
	return taskloomBin.Path(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	taskloomBin.Remove()
	os.Exit(code)
}

// cli runs the taskloom binary and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), taskloom(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("taskloom %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// notesProduct has two independent tasks; T2 goes first.
var notesProduct = testkit.NotesProduct("medium", "high")

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func write(path, content string) map[string]any {
	return map[string]any{"tool_calls": []map[string]any{{"name": "write_to_file", "arguments": map[string]string{"path": path, "content": content}}}}
}

func done(delayMS int) map[string]any {
	return map[string]any{"tool_calls": []map[string]any{{"name": "attempt_completion", "arguments": map[string]string{"result": "done"}}}, "delay_ms": delayMS}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

// repoWith makes a git repo with the config cfg and a PRODUCT.md (outside
// the repo) holding product.
func repoWith(t *testing.T, cfg map[string]any, product string) (repo, productPath string) {
	t.Helper()
	repo = t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	writeJSONFile(t, filepath.Join(repo, ".project-config.json"), cfg)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("# notes\n"), 0o644))
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "init")
	productPath = filepath.Join(t.TempDir(), "PRODUCT.md")
	require.NoError(t, os.WriteFile(productPath, []byte(product), 0o644))
	return repo, productPath
}

// escalatingRepo makes a repo whose run escalates T1 and completes T2 (one
// worker, max_attempts 1): T1's attempts write bad notes, which the verify
// command rejects, unless the prompt carries the reviewer's note.
func escalatingRepo(t *testing.T, dbURL string) (repo, product string) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "script.json")
	writeJSONFile(t, script, map[string]any{"conversations": []map[string]any{
		{"match": `Task: T1\b[\s\S]*Reviewer note: ` + regexp.QuoteMeta(testkit.ReviewNote), "replies": []any{write("notes.txt", "good notes\n"), done(0)}},
		{"match": `Task: T1\b`, "replies": []any{write("notes.txt", "bad notes\nline 2\n"), done(0)}},
		{"match": `Task: T2\b`, "replies": []any{write("log.txt", "good log\n"), done(0)}},
	}})
	return repoWith(t, map[string]any{
		"max_attempts":       1,
		"parallel_workers":   1,
		"model":              "scripted:" + script,
		"verify":             map[string]any{"command": []string{"sh", "-c", "cat *.txt 2>/dev/null; ! cat *.txt 2>/dev/null | grep -q bad"}, "timeout": "1m"},
		"build_verification": map[string]any{"command": []string{}},
		"database":           map[string]any{"url": dbURL},
	}, notesProduct)
}

var runIDPattern = regexp.MustCompile(`(?m)^run (r\S+)$`)

// escalatedRun runs escalatingRepo's product until it pauses for review
// and returns the repo and the run's ID.
func escalatedRun(t *testing.T, dbURL string) (repo, runID string) {
	t.Helper()
	repo, product := escalatingRepo(t, dbURL)
	code, out, errOut := cli(t, "run", product, "--repo", repo)
	require.Equal(t, exitReview, code, "run: stdout:\n%s\nstderr:\n%s", out, errOut)
	m := runIDPattern.FindStringSubmatch(out)
	require.NotNil(t, m, "no run ID in:\n%s", out)
	return repo, m[1]
}

// stores are the store kinds the tests run on, and how each makes a URL
// of a new, empty store.
var stores = []struct {
	name   string
	newURL func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "taskloom.db") }},
	{"postgres", func(t *testing.T) string { return storetest.NewPostgresSchema(t) }},
}

// forEachEscalatedRun runs fn in a parallel subtest for each store kind,
// on a new store that holds a run escalatedRun paused for review.
func forEachEscalatedRun(t *testing.T, fn func(t *testing.T, dbURL, repo, runID string)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			dbURL := st.newURL(t)
			repo, runID := escalatedRun(t, dbURL)
			fn(t, dbURL, repo, runID)
		})
	}
}

// openStore opens the store at dbURL for the server, closed when the test
// ends.
func openStore(t *testing.T, dbURL string) (store.Driver, *nodes.Store) {
	t.Helper()
	var d store.Driver
	var err error
	if postgres.IsURL(dbURL) {
		d, err = postgres.Open(context.Background(), dbURL, &postgres.Opts{SkipMigrate: true})
	} else {
		d, err = sqlite.Open(context.Background(), sqlite.Path(dbURL), nil)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	st, err := nodes.NewStore(d)
	require.NoError(t, err)
	return d, st
}

// newServer returns a server on the store at dbURL showing runID.
func newServer(t *testing.T, dbURL, runID string, opts *ui.Opts) *ui.Server {
	t.Helper()
	d, st := openStore(t, dbURL)
	o := ui.Opts{}
	if opts != nil {
		o = *opts
	}
	o.Saver, o.Store, o.RunID = d, st, runID
	s, err := ui.New(o)
	require.NoError(t, err)
	return s
}

// runState reads the newest checkpoint of a run.
func runState(t *testing.T, dbURL, runID string) graph.Result[nodes.State] {
	t.Helper()
	d, _ := openStore(t, dbURL)
	g, err := (&nodes.Runner{Pipeline: &nodes.Pipeline{}, Saver: d}).Runnable()
	require.NoError(t, err)
	res, err := g.State(t.Context(), runID, -1)
	require.NoError(t, err)
	return res
}

// recordedAnswers returns the raw answers recorded for a run's pending
// escalations, by task: what resume will act on.
func recordedAnswers(t *testing.T, dbURL, runID string) map[string]string {
	t.Helper()
	d, _ := openStore(t, dbURL)
	loaded, err := d.Load(t.Context(), runID, -1)
	require.NoError(t, err)
	taskOf := map[string]string{}
	out := map[string]string{}
	for _, w := range loaded.Writes {
		if w.Kind == checkpoint.WriteInterrupt {
			var ints []graph.Interruption
			require.NoError(t, json.Unmarshal(w.Payload, &ints))
			for _, in := range ints {
				var p nodes.EscalationPayload
				require.NoError(t, in.Decode(&p))
				taskOf[in.ID] = p.TaskID
			}
		}
	}
	for _, w := range loaded.Writes {
		if w.Kind == checkpoint.WriteResume {
			out[taskOf[w.TaskID]] = strings.TrimSpace(string(w.Payload))
		}
	}
	return out
}

// mainFile returns a file of the repo's main branch, "" when absent.
func mainFile(t *testing.T, repo, path string) string {
	t.Helper()
	cmd := exec.Command("git", "show", "main:"+path)
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return string(out)
}
