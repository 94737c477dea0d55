package main

import (
	"errors"
	"fmt"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
)

// storeFault words an error that stopped run runID because of its store
// as one line that says what happened and what to do, without
// the layers it went through; other errors give nil.
func storeFault(runID string, err error) error {
	var (
		decode      *checkpoint.DecodeError
		replaced    *checkpoint.ReplacedError
		unreachable *checkpoint.UnreachableError
		lost        *graph.LeaseLostError
	)
	switch {
	case errors.As(err, &decode):
		return decodeFault(decode)
	case errors.As(err, &replaced):
		return fmt.Errorf("run %s stopped: %s; its checkpoints went with it", runID, replaced)
	case errors.As(err, &unreachable):
		return fmt.Errorf("run %s stopped: %s; resume it when the store is back: taskloom resume %s", runID, unreachable, runID)
	case errors.As(err, &lost) && lost.Holder != "":
		return fmt.Errorf("run %s stopped: it lost its lease on the store: another process (%s) took the run over", runID, lost.Holder)
	case errors.Is(err, checkpoint.ErrLeaseLost):
		return fmt.Errorf("run %s stopped: it lost its lease on the store (it lapsed before it could be renewed); resume it with: taskloom resume %s", runID, runID)
	}
	return nil
}

// decodeFault names the run and the checkpoint that cannot be decoded.
func decodeFault(e *checkpoint.DecodeError) error {
	return &faultError{msg: fmt.Sprintf("run %s: checkpoint %d cannot be decoded: %s", e.ThreadID, e.Step, firstLineOf(e.Err.Error())), err: e}
}

// faultError is a store fault worded for the user, which still unwraps to
// the error it words.
type faultError struct {
	msg string
	err error
}

func (e *faultError) Error() string { return e.msg }
func (e *faultError) Unwrap() error { return e.err }
