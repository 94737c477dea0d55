package session

import (
	"errors"
	"fmt"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/clip"
)

// StoreFault words an error that stopped run runID because of its store
// as one line that says what happened and what to do, without the layers
// it went through; other errors give nil.
func StoreFault(runID, flags string, err error) error {
	var (
		decode      *checkpoint.DecodeError
		replaced    *checkpoint.ReplacedError
		unreachable *checkpoint.UnreachableError
		lost        *graph.LeaseLostError
	)
	switch {
	case errors.As(err, &decode):
		return DecodeFault(decode, flags)
	case errors.As(err, &replaced):
		return fmt.Errorf("run %s stopped: %s; its checkpoints went with it", runID, replaced)
	case errors.As(err, &unreachable):
		return fmt.Errorf("run %s stopped: %s; resume it when the store is back: taskloom resume %s%s", runID, unreachable, runID, flags)
	case errors.As(err, &lost) && lost.Holder != "":
		return fmt.Errorf("run %s stopped: it lost its lease on the store: another process (%s) took the run over", runID, lost.Holder)
	case errors.As(err, &lost) && lost.Err != nil && !errors.Is(lost.Err, checkpoint.ErrLeaseLost):
		// The renewals failed until the lease lapsed: the store was away,
		// not taken over.
		return fmt.Errorf("run %s stopped: its store did not answer for as long as its lease lasts (%s); resume it when the store is back: taskloom resume %s%s",
			runID, clip.Line(lost.Err.Error(), 200), runID, flags)
	case errors.Is(err, checkpoint.ErrLeaseLost):
		return fmt.Errorf("run %s stopped: it lost its lease on the store (it lapsed before it could be renewed); resume it with: taskloom resume %s%s", runID, runID, flags)
	}
	return nil
}

// DecodeFault names the run and the checkpoint that cannot be decoded, and
// how to go on without it: from a fork of the checkpoint before it, which
// reads nothing of the damaged one. flags are what that command needs to
// find the store (--repo, --db), as the failing command was given them.
func DecodeFault(e *checkpoint.DecodeError, flags string) error {
	msg := fmt.Sprintf("run %s: checkpoint %d cannot be decoded: %s", e.ThreadID, e.Step, clip.Line(e.Err.Error(), 0))
	if e.Step > 0 {
		msg += fmt.Sprintf("; to go on from the checkpoint before it: taskloom resume %s --from %d%s", e.ThreadID, e.Step-1, flags)
	}
	return &FaultError{msg: msg, err: e}
}

// FaultError is a store fault worded for the user, which still unwraps to
// the error it words.
type FaultError struct {
	msg string
	err error
}

func (e *FaultError) Error() string { return e.msg }
func (e *FaultError) Unwrap() error { return e.err }

// BusyMessage words a lease conflict as the documentation does, still
// unwrapping to checkpoint.ErrThreadBusy so that callers can tell it
// apart; other errors are returned as they are.
func BusyMessage(runID string, err error) error {
	var busy *checkpoint.BusyError
	if errors.As(err, &busy) {
		return &FaultError{msg: fmt.Sprintf("run %s is being driven by another process (%s); wait for it to finish or stop it", runID, busy.Holder), err: err}
	}
	return err
}

// StoppedError is a step's error that stopped a run, worded as one line
// that says what failed and how to go on: the run stopped at its last
// checkpoint, and resume takes it up from there once the cause is fixed.
// It unwraps to the step's error.
type StoppedError struct {
	RunID string
	// Next are the flags the printed resume command carries.
	Next string
	Err  error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("run %s stopped: %s; once that is fixed, resume it with: taskloom resume %s%s", e.RunID, clip.Line(e.Err.Error(), 0), e.RunID, e.Next)
}

func (e *StoppedError) Unwrap() error { return e.Err }
