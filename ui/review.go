package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/review"
	"github.com/taskloom/taskloom/nodes"
)

// reviewError is a review the server refuses, with its HTTP status.
type reviewError struct {
	code int
	msg  string
}

func (e *reviewError) Error() string { return e.msg }

func refuse(code int, format string, args ...any) error {
	return &reviewError{code: code, msg: fmt.Sprintf(format, args...)}
}

// reviewRequest is a decision taken on the page.
type reviewRequest struct {
	Task   string `json:"task"`
	Action string `json:"action"`
	Note   string `json:"note"`
}

// reviewResult says what was recorded and what is left.
type reviewResult struct {
	Recorded []recorded `json:"recorded"`
	// Pending lists the escalated tasks still waiting for a decision.
	Pending []string `json:"pending"`
	// Resume is the command that acts on the decisions; ResumeNow says
	// whether the run waits only for it.
	Resume    string `json:"resume"`
	ResumeNow bool   `json:"resume_now"`
}

type recorded struct {
	Task string `json:"task"`
	nodes.Decision
}

func (s *Server) handleReview(w http.ResponseWriter, r *http.Request) {
	var req reviewRequest
	const limit = 64 << 10
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err == nil && len(body) > limit {
		s.fail(w, r, refuse(http.StatusRequestEntityTooLarge, "the review request is over %d KiB; a note that long is not one", limit>>10))
		return
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.fail(w, r, refuse(http.StatusBadRequest, "the review request is not JSON {task, action, note}: %v", err))
		return
	}
	res, err := s.review(r.Context(), s.runOf(r), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, res)
}

// review records a decision on a run's escalated task with the domain
// review of taskloom review --task ID --action ACTION [--note TEXT]: the
// decision is checked with nodes.ApplyDecision against the tasks as they
// are, then stored as the answer to the task's human_escalation interrupt;
// abort answers every pending escalation. resume acts on the answers.
func (s *Server) review(ctx context.Context, runID string, req reviewRequest) (*reviewResult, error) {
	if !slices.Contains(review.Actions, req.Action) {
		return nil, refuse(http.StatusBadRequest, "action %q: want fixed, retry, skip or abort", req.Action)
	}
	if err := review.CheckNote(req.Action, req.Note); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	snap, err := s.load(ctx, runID)
	if err != nil {
		return nil, err
	}
	if len(snap.Escalations) == 0 {
		return nil, refuse(http.StatusConflict, "run %s has no escalation waiting for a decision (it is %s)", runID, snap.Status)
	}
	var flags string
	if len(s.resumeFlags) > 0 {
		flags = " " + strings.Join(s.resumeFlags, " ")
	}
	rv, err := review.New(runID, snap.Repo, flags, snap.result)
	if err != nil {
		return nil, refuse(http.StatusConflict, "%v", err)
	}
	var ids []string
	if req.Action != nodes.ActionAbort {
		ids = []string{req.Task}
	}
	selected, err := rv.Select(ids)
	if err != nil {
		return nil, refuse(http.StatusNotFound, "%v", err)
	}
	if err := rv.DecideFromFlags(selected, ids, req.Action, req.Note); err != nil {
		var usage review.UsageError
		if errors.As(err, &usage) {
			return nil, refuse(http.StatusBadRequest, "%v", err)
		}
		return nil, refuse(http.StatusConflict, "%v", err)
	}
	if err := rv.Record(ctx, s.graph, io.Discard); err != nil {
		if errors.Is(err, graph.ErrNotPending) {
			// Another review (another tab, or taskloom review) took the
			// decision between this one's look and its answer.
			return nil, refuse(http.StatusConflict, "run %s: a decision was recorded meanwhile; reload the page", runID)
		}
		// It names the process that drives the run when that is why.
		return nil, err
	}
	after, err := s.load(ctx, runID)
	if err != nil {
		return nil, err
	}
	res := &reviewResult{Recorded: []recorded{}, Pending: []string{}, Resume: after.Resume, ResumeNow: after.ResumeNow}
	// The answer shows the note as it was recorded.
	d := nodes.Decision{Action: req.Action, Note: review.RedactNote(strings.TrimSpace(req.Note))}
	for _, e := range snap.Escalations {
		if d.Action == nodes.ActionAbort || e.TaskID == req.Task {
			res.Recorded = append(res.Recorded, recorded{Task: e.TaskID, Decision: d})
		}
	}
	for _, e := range after.Escalations {
		res.Pending = append(res.Pending, e.TaskID)
	}
	return res, nil
}
