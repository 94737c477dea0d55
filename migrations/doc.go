// Package migrations holds taskloom's database schema and the migrator that
// applies it.
//
// The PostgreSQL migrations are the files NNN_snake_name.up.sql and
// NNN_snake_name.down.sql in this folder; the SQLite ones, the same schema
// in SQLite's dialect, are in sqlite/ under the same names. Both sets are
// embedded in the binary and numbered from 001 without gaps; Parse refuses a
// set with a gap, a duplicate or a missing half.
//
// A Migrator applies a set to one database. Each migration runs together
// with its row in the taskloom_migration table in one transaction, so a
// crash leaves the schema at a whole version. On PostgreSQL the migrator
// holds an advisory lock (pg_advisory_lock) for the current schema while it
// works, so that two processes migrating at once take turns. Migrating is
// idempotent: versions already applied are skipped. A database whose schema
// is newer than the binary knows is refused with a *NewerSchemaError.
//
// PostgreSQL objects are created in the connection's current schema: put
// search_path in the connection URL (for example
// postgres://host/db?search_path=t_abc) to migrate into another schema.
package migrations
