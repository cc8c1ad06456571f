-- PostgreSQL form of sqlite/0002_audit_blocks.sql: times are timestamptz.

CREATE TABLE audit_blocks (
    first_seq BIGINT      PRIMARY KEY,
    last_seq  BIGINT      NOT NULL CHECK (last_seq >= first_seq),
    records   INTEGER     NOT NULL CHECK (records > 0),
    min_time  TIMESTAMPTZ NOT NULL,
    max_time  TIMESTAMPTZ NOT NULL CHECK (max_time >= min_time),
    keys      TEXT        COLLATE "C" NOT NULL,
    body      BYTEA       NOT NULL
);

CREATE INDEX audit_blocks_by_max_time ON audit_blocks (max_time);

-- Appends update this row first, so its lock makes them take turns until
-- they commit: no block commits before one holding lower seqs.
CREATE TABLE audit_sequence (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    last BIGINT  NOT NULL CHECK (last >= 0)
);
INSERT INTO audit_sequence (one, last)
    VALUES (1, coalesce(pg_sequence_last_value(pg_get_serial_sequence('audit_records', 'seq')), 0));

DROP INDEX audit_records_by_time, audit_records_by_token, audit_records_by_user,
    audit_records_by_capability, audit_records_by_decision, audit_records_by_request;
ALTER TABLE audit_records RENAME TO audit_records_v1;
