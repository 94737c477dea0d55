// Package store is the seam between taskloom and the databases it keeps its
// records in, after river's riverdriver: it says what a database driver
// does, and each driver does it in a package of its own, in its own SQL
// dialect, with its own migrations.
//
// A Driver is one database. It is the checkpoint saver of the graph runtime
// (checkpoint.Saver, defined by graph/checkpoint) and the store of the
// app's own records (Records: runs and agent histories), and it migrates
// its schema. The drivers are
//
//   - store/sqlite: an embedded SQLite file (modernc.org/sqlite), the
//     default;
//   - store/postgres: PostgreSQL through pgx;
//   - Memory, in this package: process memory, for tests and programs
//     that need no durability.
//
// A driver whose database can hold a queue of attempts for worker
// processes on other machines also implements Queue: the records of the
// live workers and of their leases on attempts. PostgreSQL does, and
// package queue keeps the attempts themselves there as River jobs, through
// River's own driver for the same database; a run on SQLite works every
// attempt in its own process.
//
// Nothing registers itself: a program imports the drivers it uses, so one
// that only keeps state in memory links neither SQLite nor pgx. taskloom's
// command picks the driver from the database URL, in one place.
//
// Package storetest holds the conformance suites of Records, which every
// driver passes beside checkpointtest's suite of the saver, and of Queue,
// which every driver that implements it passes.
package store
