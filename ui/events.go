package ui

import (
	"reflect"
	"strconv"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

// follower turns successive snapshots of a run, read from the store, into
// the events that run --json prints. The run may be driven by another
// process, so its graph events are not at hand: what changed between two
// checkpoints is handed to nodes.Tracker as the node update that wrote it,
// and the Tracker words the events as it does for a run in this process.
type follower struct {
	tr   nodes.Tracker
	prev *snapshot
}

func newFollower(runID string, now func() time.Time) *follower {
	return &follower{tr: nodes.Tracker{RunID: runID, NowFunc: now}}
}

// next returns the events that lead from the previous snapshot to snap.
// The first snapshot only seeds the follower: the page shows it whole.
func (f *follower) next(snap *snapshot) []nodes.RunEvent {
	prev := f.prev
	f.prev = snap
	if prev == nil {
		f.tr.Seed(snap.state)
		return nil
	}
	old, cur := prev.state, snap.state
	var verified, integrated, tasks nodes.State
	for _, a := range cur.Attempts.Values() {
		key := a.TaskID + "/" + strconv.Itoa(a.Attempt)
		was, _ := old.Attempts.Get(key)
		if a.Integrated != "" && was.Integrated == "" {
			integrated.Attempts.Put(key, a)
		}
		if checked(a) && (!checked(was) || a.Error != was.Error || a.Verified != was.Verified) {
			verified.Attempts.Put(key, a)
		}
	}
	for _, t := range cur.Tasks.Values() {
		if was, ok := old.Tasks.Get(t.ID); !ok || !reflect.DeepEqual(was, t) {
			tasks.Tasks.Put(t.ID, t)
			if t.Status == planner.StatusInProgress {
				// The attempt it runs, as the run counts it: the Tracker
				// would guess the one after the last it saw checked, and a
				// poll may have missed a whole try in between.
				n := nodes.CurrentAttempt(cur, t.ID)
				tasks.Attempts.Put(t.ID+"/"+strconv.Itoa(n), nodes.Attempt{TaskID: t.ID, Attempt: n})
			}
		}
	}
	known := map[nodes.Escalation]bool{}
	for _, e := range old.Escalations.Get() {
		known[e] = true
	}
	var fresh []nodes.Escalation
	for _, e := range cur.Escalations.Get() {
		if !known[e] {
			fresh = append(fresh, e)
		}
	}
	tasks.Escalations = graph.V(fresh)
	tasks.Warnings = cur.Warnings
	node := "poll"
	if old.Tasks.Len() == 0 && cur.Tasks.Len() > 0 {
		node = nodes.NodeBreakdown // the plan appeared: plan_ready
	}
	var out []nodes.RunEvent
	out = append(out, f.tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: nodes.NodeVerify, Update: verified})...)
	out = append(out, f.tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: nodes.NodeIntegrate, Update: integrated})...)
	out = append(out, f.tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: node, Update: tasks})...)
	if !reflect.DeepEqual(prev.Usage, snap.Usage) {
		ev := f.tr.Event(nodes.EventUsage)
		ev.Usage = snap.Usage
		out = append(out, ev)
	}
	if snap.recorded != prev.recorded && snap.recorded != nodes.RunRunning {
		ev := f.tr.Event(nodes.EventRunFinished)
		ev.Status, ev.ExitCode, ev.Reason = snap.recorded, nodes.ExitCode(snap.recorded), snap.Reason
		out = append(out, ev)
	}
	return out
}

// checked reports whether an attempt has been through its tests (or was
// stopped before them with an error).
func checked(a nodes.Attempt) bool {
	return a.Verified || a.Tests != nil || (a.Error != "" && a.Question == "" && a.ProviderError == "")
}

// statusOrder is the order in which the page's legend lists the statuses.
var statusOrder = []string{
	string(planner.StatusPending), string(planner.StatusInProgress), string(planner.StatusCompleted),
	string(planner.StatusFailed), StatusEscalated, string(planner.StatusSkipped), string(planner.StatusBlocked),
}
