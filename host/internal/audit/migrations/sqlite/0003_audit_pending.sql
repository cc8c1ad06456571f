-- An action's record is kept here before the action runs (Writer.Admit),
-- and deleted in the transaction that appends its outcome's record, so a
-- host that stops while an action runs leaves the record behind: the
-- writer appends it, with outcome interrupted, once it is older than the
-- longest a call may run.
CREATE TABLE audit_pending (
    id   TEXT PRIMARY KEY,
    -- The record's time, in audit_blocks' text form.
    at   TEXT NOT NULL CHECK (length(at) = 27),
    -- The record, as JSON, already bounded.
    body BLOB NOT NULL
) STRICT;

CREATE INDEX audit_pending_by_at ON audit_pending (at);
