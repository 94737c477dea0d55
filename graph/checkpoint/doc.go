// Package checkpoint defines how the graph runtime stores the checkpoints
// of its threads: the Saver interface and its errors, an in-memory saver
// (Memory), and the pieces the durable savers share. The durable savers
// are the database drivers in store/sqlite and store/postgres; package
// checkpointtest holds the conformance suite every saver passes.
//
// A checkpoint holds the writes of one super-step (its deltas), not the
// whole state: a keyed collection stores only the entries that changed and
// an append field only what was appended. The runtime adds a full snapshot
// now and then, when the deltas written since the last snapshot outweigh
// it, so reads stay fast and storage grows with what changed.
//
// One process at a time drives a thread: it holds the thread's lease, and
// every write carries the lease's fencing token. A second process gets a
// *BusyError naming the holder; a lease whose holder died expires and is
// taken over. Acquire given the zero time takes and compares leases on the
// store's clock rather than the caller's, and Put renews such a lease on
// that clock, so that processes whose clocks disagree agree on when a
// lease lapses.
//
// # Errors
//
// Errors a caller can act on match a sentinel with errors.Is. ErrNotFound,
// ErrLeaseLost and ErrConflict come bare; the others come in a typed
// error that says more: a *BusyError names the lease's holder, a
// *DecodeError the thread and step whose bytes cannot be decoded (that
// thread only is affected), a *ReplacedError the database file deleted or
// replaced under an open saver, and an *UnreachableError the store that
// did not answer for the whole retry period. WrapStoreError names the
// store in any other error.
//
// # For savers
//
// A saver of a store that can go away (a database server) runs each
// operation through a Retrier, which retries transient failures with
// jittered exponential backoff for up to RetryOpts.For and says once per
// outage that it waits. DedupWrites gives PutWrites its last-write-wins
// rule, and MaskURL and MaskError keep a database password out of errors
// and logs.
package checkpoint
