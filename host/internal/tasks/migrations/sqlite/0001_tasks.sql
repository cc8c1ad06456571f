-- Tasks (the MCP tasks extension): a call that runs in the background,
-- with the principal who started it, what it called, and the one outcome
-- it came to. status moves working <-> input_required, then once to
-- completed, failed or cancelled. Times are Unix milliseconds, so a task's
-- lastUpdatedAt and TTL keep the precision the wire gives them.

CREATE TABLE tasks (
    id             TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    token_label    TEXT    NOT NULL,
    user_id        TEXT    NOT NULL,
    capability     TEXT    NOT NULL CHECK (capability <> ''),
    args_sha256    BLOB    NOT NULL CHECK (length(args_sha256) = 32),
    status         TEXT    NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message TEXT    NOT NULL DEFAULT '',
    outcome        BLOB,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL CHECK (updated_ms >= created_ms),
    expires_ms     INTEGER NOT NULL CHECK (expires_ms > created_ms),
    CHECK ((status IN ('completed', 'failed')) = (outcome IS NOT NULL))
);

CREATE INDEX tasks_by_owner ON tasks (token_label, user_id, status);
CREATE INDEX tasks_by_expiry ON tasks (expires_ms);
CREATE INDEX tasks_by_status ON tasks (status, updated_ms);
