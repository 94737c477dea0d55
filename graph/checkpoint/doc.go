// Package checkpoint stores the checkpoints of graph threads: an in-memory
// saver, an embedded SQLite saver (the default) and a PostgreSQL saver.
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
// taken over.
package checkpoint
