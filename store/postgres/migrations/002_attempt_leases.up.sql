-- 002_attempt_leases: which worker holds each queued attempt, until when,
-- and what it is doing. A worker renews its row while it works; a row past
-- its expiry means the worker died, and the run hands the attempt to
-- another. The attempts themselves are River jobs (river_job).

CREATE TABLE attempt_leases (
    job_id     bigint      PRIMARY KEY,
    run_id     text        NOT NULL,
    task_id    text        NOT NULL,
    attempt    integer     NOT NULL,
    -- worker is host:pid of the process working the attempt.
    worker     text        NOT NULL,
    expires_at timestamptz NOT NULL,
    tool       text        NOT NULL DEFAULT '',
    summary    text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX attempt_leases_run_idx ON attempt_leases (run_id);

-- attempt_workers lists the live worker processes and how many attempts
-- each runs at once, so that a run queues as many attempts as there are
-- workers to take them. run_id is set for a run driver's own workers,
-- which take that run's attempts only.
CREATE TABLE attempt_workers (
    name        text        PRIMARY KEY,
    run_id      text        NOT NULL DEFAULT '',
    concurrency integer     NOT NULL,
    seen_at     timestamptz NOT NULL DEFAULT now()
);
