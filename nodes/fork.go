package nodes

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/taskloom/taskloom/planner"
)

// Adopted says what AdoptFork settled.
type Adopted struct {
	// Integrated lists the tasks the source run integrated after the
	// fork's checkpoint: they are completed in the fork too.
	Integrated []string
	// Dropped lists the tasks whose tries were in flight at the fork's
	// checkpoint: they are pending again, counted against nothing.
	Dropped []string
}

// AdoptFork settles what a fork took over from source, the run it was
// forked from, at the checkpoint it was taken from; family lists source
// first, then the other runs forked from the same first run, whose work
// on the branch counts too. The fork has its own
// worktrees, so the source's tries in flight there cannot go on in it;
// and the source may have gone on to integrate tasks after that
// checkpoint (a damaged newer checkpoint is what a fork recovers from).
// A task not completed in the fork whose try of the source is on the
// branch, by its trailer, is completed with that commit; an in-flight one
// that is not is dropped and pending again. The fork then goes on from
// task selection, with the branch's head as its head.
func (r *Runner) AdoptFork(ctx context.Context, forkID string, family []string) (Adopted, error) {
	var ad Adopted
	st, ok, err := r.latest(ctx, forkID)
	if err != nil || !ok {
		return ad, err
	}
	repo := r.Pipeline.Repo
	present, err := repo.IntegratedAttempts(ctx)
	if err != nil {
		return ad, fmt.Errorf("fork %s: %w", forkID, err)
	}
	// A try integrated and then reverted (it broke the build) is not on
	// the branch, though its commit and trailer are.
	reverted, err := repo.RevertedAttempts(ctx)
	if err != nil {
		return ad, fmt.Errorf("fork %s: %w", forkID, err)
	}
	for trailer := range reverted {
		delete(present, trailer)
	}
	var u State
	queue := slices.Clone(st.Queue.Get())
	for _, t := range st.Tasks.Values() {
		if t.Status == planner.StatusCompleted || t.Status == planner.StatusSkipped {
			continue
		}
		if run, n, sha := familyTry(present, family, forkID, t.ID); sha != "" {
			key := attemptKey(t.ID, n)
			rec, ok := st.Attempts.Get(key)
			if !ok || run != family[0] {
				rec = Attempt{TaskID: t.ID, Attempt: n, Branch: "taskloom/" + run + "/" + t.ID + "/" + strconv.Itoa(n)}
			}
			rec.Integrated, rec.Verified, rec.Changed, rec.Error = sha, true, true, ""
			u.Attempts.Put(key, rec)
			u.Integrated.Add(key)
			queue = append(queue, key)
			t.Status, t.Error = planner.StatusCompleted, ""
			ad.Integrated = append(ad.Integrated, t.ID)
		} else if t.Status == planner.StatusInProgress {
			t.Status = planner.StatusPending
			ad.Dropped = append(ad.Dropped, t.ID)
		} else {
			continue
		}
		u.Tasks.Put(t.ID, t)
	}
	if len(ad.Integrated) == 0 && len(ad.Dropped) == 0 && len(st.Batch.Get()) == 0 {
		return ad, nil
	}
	slices.Sort(ad.Integrated)
	slices.Sort(ad.Dropped)
	head, err := repo.Head(ctx)
	if err != nil {
		return ad, fmt.Errorf("fork %s: %w", forkID, err)
	}
	u.Head.Set(head)
	u.Batch.Set(nil)
	if len(ad.Integrated) > 0 {
		u.Queue.Set(queue)
	}
	text := fmt.Sprintf("forked from %s", family[0])
	if len(ad.Integrated) > 0 {
		text += "; integrated there after the checkpoint, so completed: " + strings.Join(ad.Integrated, ", ")
	}
	if len(ad.Dropped) > 0 {
		text += "; tries in flight there dropped: " + strings.Join(ad.Dropped, ", ")
	}
	u.Log.Add(Entry{Time: r.Pipeline.now(), Text: text})
	g, err := r.Runnable()
	if err != nil {
		return ad, err
	}
	// As if a review had just ended: the fork goes on from task
	// selection, and the pending step (the source's tries) is dropped.
	if _, err := g.UpdateState(ctx, forkID, NodeEscalation, u); err != nil {
		return ad, fmt.Errorf("fork %s: %w", forkID, err)
	}
	return ad, nil
}

// familyTry returns a try of task by a run of family (not fork itself)
// whose trailer is on the branch: its run, its number and its commit
// there; "", 0 and "" when there is none. The source's newest comes
// first.
func familyTry(present map[string]string, family []string, fork, task string) (string, int, string) {
	for _, run := range family {
		if run == fork {
			continue
		}
		best, sha := 0, ""
		prefix := run + "/" + task + "/"
		for trailer, commit := range present {
			if rest, ok := strings.CutPrefix(trailer, prefix); ok {
				if n, err := strconv.Atoi(rest); err == nil && n > best {
					best, sha = n, commit
				}
			}
		}
		if sha != "" {
			return run, best, sha
		}
	}
	return "", 0, ""
}
