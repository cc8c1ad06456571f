-- Held calls keep their arguments two ways: args_shown, redacted of every
-- value the capability marks sensitive, is what every view shows; args,
-- exactly as sent, only while the call may still run (pending, approved,
-- running), cleared when it has run, was rejected or expired. args_key
-- (SHA-256 of the canonical arguments) joins an identical pending request
-- instead of storing a second one, and pending_slot bounds a user's
-- pending requests: both are unique among pending requests, so replicas
-- agree without talking. SQLite cannot drop a NOT NULL, so the table is
-- built again. Requests stored before have no redacted copy (views show
-- them withheld), and their settled ones lose their raw arguments now.

CREATE TABLE approvals_new (
    id           TEXT NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    token_label  TEXT NOT NULL,
    role         TEXT NOT NULL,
    scope        TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    capability   TEXT NOT NULL CHECK (capability <> ''),
    args         BLOB CHECK (args IS NULL OR status IN ('pending', 'approved', 'running')),
    args_sha256  BLOB NOT NULL CHECK (length(args_sha256) = 32),
    args_shown   BLOB,
    args_key     BLOB CHECK (args_key IS NULL OR length(args_key) = 32),
    pending_slot INTEGER CHECK (pending_slot IS NULL OR pending_slot >= 0),
    risk         TEXT NOT NULL CHECK (risk IN ('review_required', 'dangerous')),
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'running', 'done')),
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL CHECK (expires_at > created_at),
    decided_by   TEXT,
    decided_at   TEXT,
    reason       TEXT,
    started_at   TEXT,
    finished_at  TEXT,
    outcome_kind TEXT CHECK (outcome_kind IN ('result', 'tool_error', 'refused', 'failed')),
    outcome      BLOB,
    announced_at TEXT,
    CHECK ((status = 'done') = (outcome_kind IS NOT NULL))
);

INSERT INTO approvals_new (id, token_label, role, scope, user_id, capability, args, args_sha256, risk, status,
    created_at, expires_at, decided_by, decided_at, reason, started_at, finished_at, outcome_kind, outcome, announced_at)
SELECT id, token_label, role, scope, user_id, capability,
    CASE WHEN status IN ('pending', 'approved', 'running') THEN args END, args_sha256, risk, status,
    created_at, expires_at, decided_by, decided_at, reason, started_at, finished_at, outcome_kind, outcome, announced_at
FROM approvals;

DROP TABLE approvals;
ALTER TABLE approvals_new RENAME TO approvals;

CREATE INDEX approvals_by_status ON approvals (status, expires_at);
CREATE INDEX approvals_by_user ON approvals (user_id, created_at);
CREATE INDEX approvals_unannounced ON approvals (decided_at) WHERE announced_at IS NULL AND decided_at IS NOT NULL;
CREATE UNIQUE INDEX approvals_pending_call ON approvals (token_label, user_id, capability, args_key)
    WHERE status = 'pending' AND args_key IS NOT NULL;
CREATE UNIQUE INDEX approvals_pending_slot ON approvals (user_id, pending_slot)
    WHERE status = 'pending' AND pending_slot IS NOT NULL;
