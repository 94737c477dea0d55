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
//
// # Durable savers
//
// Open picks the saver from a database URL: postgres:// or postgresql://
// opens a *Postgres, anything else (a path, sqlite://PATH, file:PATH) a
// *SQLite. Both apply the schema migrations of package migrations when
// they open, and both give access to their database ((*SQLite).DB,
// (*Postgres).Pool) so that other records (runs, agent histories) can be
// kept in the same place. Errors name the URL with its password masked
// (MaskURL).
//
// The SQLite saver runs in WAL mode with one write connection and a small
// read pool. Its synchronous pragma is NORMAL by default: in WAL mode a
// committed checkpoint survives the process being killed, and only a power
// loss or an OS crash can lose the last few commits. SQLiteOpts.Synchronous
// = "FULL" syncs every commit and survives those too.
//
// The PostgreSQL saver works in the current schema of its connections (put
// search_path in the URL to choose one). Put is a single statement, one
// round trip and one commit: it moves the head, renews the lease and
// inserts the checkpoint only when the lease is current and the step is the
// head's successor, and it looks at the thread again only to tell
// ErrLeaseLost from ErrConflict when it fails.
//
// Durable savers keep times to the microsecond. Package checkpointtest holds
// the conformance suite all savers pass, and StartPostgres, a server of a
// test's own that it may stop and restart.
//
// # Store faults
//
// The PostgreSQL saver retries an operation that fails because the server
// or the connection went away (refused or reset connections, EOF, SQLSTATE
// 57P01-57P03 while the server restarts) with jittered exponential backoff,
// capped at a few seconds, for up to RetryOpts.For (DefaultRetryFor); it
// says once per outage that it waits (RetryOpts.UnreachableFunc and the
// logger), and after that period fails with an *UnreachableError. Every
// operation is safe to run again: Put looks for its own checkpoint when a
// try may have committed before its connection dropped, PutWrites and
// Acquire are upserts that find their own earlier effect, Prune and Load
// are transactions run again whole.
//
// Acquire given the zero time takes and compares leases on the store's
// clock (now() in PostgreSQL, unixepoch in SQLite), and Put renews such a
// lease on that clock, so that processes whose clocks disagree agree on
// when a lease lapses.
//
// A checkpoint whose bytes cannot be decoded is a *DecodeError naming its
// thread and step; it concerns that thread only. A SQLite file deleted or
// replaced under an open saver fails the next write with a *ReplacedError
// naming the file: the saver records the file's identity when it opens and
// compares it (one stat) before each write.
package checkpoint
