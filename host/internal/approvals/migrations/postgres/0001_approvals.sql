-- Approval requests: a call the gate held for a human's yes, with the
-- principal, the capability and the arguments exactly as sent, and what
-- became of it. status moves one way: pending -> approved -> running ->
-- done, or pending -> rejected | expired. PostgreSQL form of
-- sqlite/0001_approvals.sql: times are timestamptz, bytes are bytea.

CREATE TABLE approvals (
    id           TEXT        COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    token_label  TEXT        NOT NULL,
    role         TEXT        NOT NULL,
    scope        TEXT        NOT NULL,
    user_id      TEXT        COLLATE "C" NOT NULL,
    capability   TEXT        NOT NULL CHECK (capability <> ''),
    args         BYTEA       NOT NULL,
    args_sha256  BYTEA       NOT NULL CHECK (octet_length(args_sha256) = 32),
    risk         TEXT        NOT NULL CHECK (risk IN ('review_required', 'dangerous')),
    status       TEXT        NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'running', 'done')),
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL CHECK (expires_at > created_at),
    decided_by   TEXT,
    decided_at   TIMESTAMPTZ,
    reason       TEXT,
    started_at   TIMESTAMPTZ,
    finished_at  TIMESTAMPTZ,
    outcome_kind TEXT        CHECK (outcome_kind IN ('result', 'tool_error', 'refused', 'failed')),
    outcome      BYTEA,
    CHECK ((status = 'done') = (outcome_kind IS NOT NULL))
);

CREATE INDEX approvals_by_status ON approvals (status, expires_at);
CREATE INDEX approvals_by_user ON approvals (user_id, created_at);
