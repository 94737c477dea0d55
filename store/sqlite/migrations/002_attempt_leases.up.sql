-- 002_attempt_leases: the worker leases and registry of the PostgreSQL
-- store, where attempts can be queued for workers on other machines. A
-- SQLite store runs every attempt in the run's process, so these tables
-- stay empty; they keep both stores at the same schema version.

CREATE TABLE attempt_leases (
    job_id     INTEGER PRIMARY KEY,
    run_id     TEXT    NOT NULL,
    task_id    TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    worker     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    tool       TEXT    NOT NULL DEFAULT '',
    summary    TEXT    NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE attempt_workers (
    name        TEXT    PRIMARY KEY,
    run_id      TEXT    NOT NULL DEFAULT '',
    concurrency INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL
) STRICT;
