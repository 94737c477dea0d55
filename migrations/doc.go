// Package migrations is the migrator that applies a database driver's
// schema migrations. It knows no database: each driver (store/sqlite,
// store/postgres) embeds its own migrations, written in its own dialect, and
// implements Session for its database.
//
// A driver's migrations are the files NNN_snake_name.up.sql and
// NNN_snake_name.down.sql of its migrations/ folder, numbered from 001
// without gaps; Parse refuses a set with a gap, a duplicate, a missing half
// or CREATE INDEX CONCURRENTLY.
//
// A Migrator applies a set to one database. Each migration runs together
// with its row in the taskloom_migration table in one transaction, so a
// crash leaves the schema at a whole version. The session holds a lock while
// it works (pg_advisory_lock on PostgreSQL, for the current schema), so that
// two processes migrating at once take turns. Migrating is idempotent:
// versions already applied are skipped. A database whose schema is newer
// than the binary knows is refused with a *NewerSchemaError. Every applied
// or reverted migration is logged with its version, direction and duration.
package migrations
