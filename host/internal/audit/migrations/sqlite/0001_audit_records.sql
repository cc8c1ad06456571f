-- Audit records: one per decision of the gate, appended in batches and
-- deleted by age. seq is the order of commits and never reused
-- (AUTOINCREMENT), so a reader following "everything after seq N" misses
-- nothing even after retention emptied the table. Times are fixed-width
-- RFC 3339 UTC text to the microsecond, which sorts as the time does.

CREATE TABLE audit_records (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT    NOT NULL CHECK (id <> ''),
    parent_id        TEXT    NOT NULL,
    time             TEXT    NOT NULL CHECK (length(time) = 27),
    request_id       TEXT    NOT NULL,
    protocol         TEXT    NOT NULL,
    protocol_version TEXT    NOT NULL,
    token_label      TEXT    NOT NULL,
    role             TEXT    NOT NULL,
    scope            TEXT    NOT NULL,
    user_id          TEXT    NOT NULL,
    capability       TEXT    NOT NULL CHECK (capability <> ''),
    plugin           TEXT    NOT NULL,
    -- Compact JSON, redacted and capped; NULL: no arguments.
    args             TEXT,
    decision         TEXT    NOT NULL,
    step             TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    outcome          TEXT    NOT NULL,
    error_code       TEXT    NOT NULL,
    error_ref        TEXT    NOT NULL,
    latency_ns       INTEGER NOT NULL CHECK (latency_ns >= 0),
    CHECK ((decision = 'admitted' AND step = '' AND outcome IN ('ok', 'tool_error', 'internal_error'))
        OR (decision = 'refused' AND step <> '' AND outcome = ''))
) STRICT;

-- Retention deletes by time; Since and Until select by it.
CREATE INDEX audit_records_by_time ON audit_records (time);
-- The filters, each in the order pages are read.
CREATE INDEX audit_records_by_token ON audit_records (token_label, seq);
CREATE INDEX audit_records_by_user ON audit_records (user_id, seq);
CREATE INDEX audit_records_by_capability ON audit_records (capability, seq);
CREATE INDEX audit_records_by_decision ON audit_records (decision, step, seq);
CREATE INDEX audit_records_by_request ON audit_records (request_id, seq);
