-- Tasks (the MCP tasks extension): a call that runs in the background,
-- with the principal who started it, what it called, and the one outcome
-- it came to. status moves working <-> input_required, then once to
-- completed, failed or cancelled. PostgreSQL form of sqlite/0001_tasks.sql:
-- times are Unix milliseconds in both, bytes are bytea.

CREATE TABLE tasks (
    id             TEXT   COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    token_label    TEXT   COLLATE "C" NOT NULL,
    user_id        TEXT   COLLATE "C" NOT NULL,
    capability     TEXT   NOT NULL CHECK (capability <> ''),
    args_sha256    BYTEA  NOT NULL CHECK (octet_length(args_sha256) = 32),
    status         TEXT   NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message TEXT   NOT NULL DEFAULT '',
    outcome        BYTEA,
    created_ms     BIGINT NOT NULL,
    updated_ms     BIGINT NOT NULL CHECK (updated_ms >= created_ms),
    expires_ms     BIGINT NOT NULL CHECK (expires_ms > created_ms),
    CHECK ((status IN ('completed', 'failed')) = (outcome IS NOT NULL))
);

CREATE INDEX tasks_by_owner ON tasks (token_label, user_id, status);
CREATE INDEX tasks_by_expiry ON tasks (expires_ms);
CREATE INDEX tasks_by_status ON tasks (status, updated_ms);
