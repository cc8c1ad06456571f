-- Audit records: one per decision of the gate, appended in batches and
-- deleted by age. seq is the order of commits (appends take a lock, so no
-- batch commits before one that drew lower numbers) and never reused, so
-- a reader following "everything after seq N" misses nothing.
-- PostgreSQL form of sqlite/0001_audit_records.sql: times are timestamptz,
-- and text compares byte by byte (COLLATE "C").

CREATE TABLE audit_records (
    seq              BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT        COLLATE "C" NOT NULL CHECK (id <> ''),
    parent_id        TEXT        COLLATE "C" NOT NULL,
    time             TIMESTAMPTZ NOT NULL,
    request_id       TEXT        COLLATE "C" NOT NULL,
    protocol         TEXT        COLLATE "C" NOT NULL,
    protocol_version TEXT        COLLATE "C" NOT NULL,
    token_label      TEXT        COLLATE "C" NOT NULL,
    role             TEXT        COLLATE "C" NOT NULL,
    scope            TEXT        COLLATE "C" NOT NULL,
    user_id          TEXT        COLLATE "C" NOT NULL,
    capability       TEXT        COLLATE "C" NOT NULL CHECK (capability <> ''),
    plugin           TEXT        COLLATE "C" NOT NULL,
    -- Compact JSON, redacted and capped, kept as written; NULL: no arguments.
    args             TEXT,
    decision         TEXT        COLLATE "C" NOT NULL,
    step             TEXT        COLLATE "C" NOT NULL,
    reason           TEXT        NOT NULL,
    outcome          TEXT        COLLATE "C" NOT NULL,
    error_code       TEXT        COLLATE "C" NOT NULL,
    error_ref        TEXT        COLLATE "C" NOT NULL,
    latency_ns       BIGINT      NOT NULL CHECK (latency_ns >= 0),
    CHECK ((decision = 'admitted' AND step = '' AND outcome IN ('ok', 'tool_error', 'internal_error'))
        OR (decision = 'refused' AND step <> '' AND outcome = ''))
);

-- Retention deletes by time; Since and Until select by it.
CREATE INDEX audit_records_by_time ON audit_records (time);
-- The filters, each in the order pages are read.
CREATE INDEX audit_records_by_token ON audit_records (token_label, seq);
CREATE INDEX audit_records_by_user ON audit_records (user_id, seq);
CREATE INDEX audit_records_by_capability ON audit_records (capability, seq);
CREATE INDEX audit_records_by_decision ON audit_records (decision, step, seq);
CREATE INDEX audit_records_by_request ON audit_records (request_id, seq);
