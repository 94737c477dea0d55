-- 001_init: the checkpoint store (threads, checkpoints, pending writes) and
-- the run tables (runs, agent_histories). Objects are created in the
-- connection's current schema (its search_path).

CREATE TABLE threads (
    thread_id     text        PRIMARY KEY,
    -- head is the newest checkpoint's step; -1 while the thread has none.
    head          bigint      NOT NULL DEFAULT -1,
    -- lease_holder is NULL when the lease was released.
    lease_holder  text,
    -- lease_token is the fencing token: it grows with every acquisition.
    lease_token   bigint      NOT NULL DEFAULT 0,
    lease_expires timestamptz NOT NULL,
    -- ttl_us is the lease's time to live, in microseconds, as last acquired.
    ttl_us        bigint      NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

CREATE INDEX threads_updated_at_idx ON threads (updated_at DESC, thread_id);

CREATE TABLE checkpoints (
    thread_id  text        NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    step       bigint      NOT NULL,
    source     text        NOT NULL,
    writers    text[],
    deltas     bytea,
    snapshot   bytea,
    next       bytea,
    meta       bytea,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (thread_id, step)
);

-- Finds the newest snapshot at or before a step.
CREATE INDEX checkpoints_snapshot_idx ON checkpoints (thread_id, step) WHERE snapshot IS NOT NULL;

CREATE TABLE writes (
    thread_id text   NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    step      bigint NOT NULL,
    task_id   text   NOT NULL,
    kind      text   NOT NULL,
    payload   bytea,
    -- seq orders the writes by insertion; an upsert takes a new one.
    seq       bigserial NOT NULL,
    PRIMARY KEY (thread_id, step, task_id, kind)
);

CREATE TABLE runs (
    id           text        PRIMARY KEY,
    product_path text        NOT NULL,
    repo         text        NOT NULL,
    status       text        NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    -- meta is JSON text.
    meta         text        NOT NULL DEFAULT '{}'
);

CREATE INDEX runs_repo_created_at_idx ON runs (repo, created_at DESC);

CREATE TABLE agent_histories (
    run_id          text        NOT NULL,
    conversation_id text        NOT NULL,
    parent_id       text,
    task_id         text        NOT NULL,
    attempt         integer     NOT NULL,
    -- ui, api and meta are JSON text: the UI messages, the API conversation
    -- history and the task metadata.
    ui              text        NOT NULL DEFAULT '[]',
    api             text        NOT NULL DEFAULT '[]',
    meta            text        NOT NULL DEFAULT '{}',
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (run_id, conversation_id)
);

CREATE INDEX agent_histories_task_idx ON agent_histories (run_id, task_id, attempt);
