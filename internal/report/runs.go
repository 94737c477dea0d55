package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/scheduler"
)

// Row is a line of taskloom runs.
type Row struct {
	RunID     string            `json:"run_id"`
	Product   string            `json:"product"`
	Repo      string            `json:"repo"`
	Status    string            `json:"status"`
	StartedAt time.Time         `json:"started_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Progress  string            `json:"progress"`
	Tasks     scheduler.Summary `json:"tasks"`
	// Error says why the run's state cannot be read; such a run is listed
	// all the same, and the other runs with it.
	Error string `json:"error,omitempty"`
}

// Runs lists the runs in s's store, newest first.
func Runs(ctx context.Context, s *session.Session) ([]Row, error) {
	runs, err := s.Store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	g, err := s.Graph()
	if err != nil {
		return nil, err
	}
	threads, err := threadsOf(ctx, s)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rows := make([]Row, 0, len(runs))
	for _, r := range runs {
		r.Status = liveStatus(r, threads, now)
		row := Row{RunID: r.ID, Product: r.ProductPath, Repo: r.Repo, Status: r.Status, StartedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
		head, _, err := session.HeadState(ctx, g, r.ID)
		if errors.Is(err, checkpoint.ErrCorrupt) {
			// One damaged run does not hide the others.
			row.Progress, row.Error = "unreadable", err.Error()
			rows = append(rows, row)
			continue
		}
		if err != nil {
			return nil, err
		}
		row.Tasks = scheduler.Summarize(head.State.Tasks.Values())
		row.Progress = row.Tasks.Progress
		rows = append(rows, row)
	}
	return rows, nil
}

// threadsOf returns the threads of s's store by ID.
func threadsOf(ctx context.Context, s *session.Session) (map[string]checkpoint.ThreadInfo, error) {
	infos, err := s.Saver.Threads(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]checkpoint.ThreadInfo, len(infos))
	for _, th := range infos {
		out[th.ThreadID] = th
	}
	return out, nil
}

// liveStatus is nodes.LiveStatus with the run's thread looked up.
func liveStatus(run nodes.Run, threads map[string]checkpoint.ThreadInfo, now time.Time) string {
	th, ok := threads[run.ID]
	return nodes.LiveStatus(run, th, ok, now)
}

// WriteRuns prints rows as a table; dbURL names the store when it has no
// runs.
func WriteRuns(w io.Writer, rows []Row, dbURL string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "no runs in %s; start one with taskloom run PRODUCT.md\n", checkpoint.MaskURL(dbURL))
		return err
	}
	// A store that several repositories share (a team's PostgreSQL) lists
	// their runs together: then each row says whose it is.
	repos := false
	for _, r := range rows {
		repos = repos || r.Repo != rows[0].Repo
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "ID\tPRODUCT\tSTATUS\tSTARTED\tPROGRESS"
	if repos {
		header = "ID\tREPO\tPRODUCT\tSTATUS\tSTARTED\tPROGRESS"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		progress := fmt.Sprintf("%s (%d/%d)", r.Progress, r.Tasks.Completed, r.Tasks.Total)
		if r.Error != "" {
			progress = r.Progress + ": " + r.Error
		}
		id := r.RunID
		if repos {
			id += "\t" + r.Repo
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", id, productName(r.Product, r.Repo), r.Status, localTime(r.StartedAt), progress)
	}
	return tw.Flush()
}

// productName shows a PRODUCT.md relative to its repo when it is inside.
func productName(product, repo string) string {
	if rel, err := filepath.Rel(repo, product); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return product
}
