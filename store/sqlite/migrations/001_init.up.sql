-- 001_init: the checkpoint store (threads, checkpoints, pending writes) and
-- the run tables (runs, agent_histories).
--
-- Times are INTEGER microseconds since the Unix epoch (UTC), so that they
-- sort and compare as numbers: time.Time.UnixMicro and time.UnixMicro.

CREATE TABLE threads (
    thread_id     TEXT    PRIMARY KEY,
    -- head is the newest checkpoint's step; -1 while the thread has none.
    head          INTEGER NOT NULL DEFAULT -1,
    -- lease_holder is NULL when the lease was released.
    lease_holder  TEXT,
    -- lease_token is the fencing token: it grows with every acquisition.
    lease_token   INTEGER NOT NULL DEFAULT 0,
    lease_expires INTEGER NOT NULL,
    -- ttl_us is the lease's time to live, in microseconds, as last acquired.
    ttl_us        INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX threads_updated_at_idx ON threads (updated_at DESC, thread_id);

CREATE TABLE checkpoints (
    thread_id  TEXT    NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    step       INTEGER NOT NULL,
    source     TEXT    NOT NULL,
    -- writers is a JSON array of node names, or NULL.
    writers    TEXT,
    deltas     BLOB,
    snapshot   BLOB,
    next       BLOB,
    meta       BLOB,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, step)
) STRICT, WITHOUT ROWID;

CREATE INDEX checkpoints_snapshot_idx ON checkpoints (thread_id, step) WHERE snapshot IS NOT NULL;

CREATE TABLE writes (
    thread_id TEXT    NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    step      INTEGER NOT NULL,
    task_id   TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    payload   BLOB,
    -- seq orders the writes by insertion; an upsert takes a new one.
    seq       INTEGER NOT NULL,
    PRIMARY KEY (thread_id, step, task_id, kind)
) STRICT;

CREATE TABLE runs (
    id           TEXT    PRIMARY KEY,
    product_path TEXT    NOT NULL,
    repo         TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    -- meta is JSON text.
    meta         TEXT    NOT NULL DEFAULT '{}'
) STRICT;

CREATE INDEX runs_repo_created_at_idx ON runs (repo, created_at DESC);

CREATE TABLE agent_histories (
    run_id          TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    parent_id       TEXT,
    task_id         TEXT    NOT NULL,
    attempt         INTEGER NOT NULL,
    -- ui, api and meta are JSON text: the UI messages, the API conversation
    -- history and the task metadata.
    ui              TEXT    NOT NULL DEFAULT '[]',
    api             TEXT    NOT NULL DEFAULT '[]',
    meta            TEXT    NOT NULL DEFAULT '{}',
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (run_id, conversation_id)
) STRICT;

CREATE INDEX agent_histories_task_idx ON agent_histories (run_id, task_id, attempt);
