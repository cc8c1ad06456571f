-- PostgreSQL form of sqlite/0003_audit_pending.sql.

CREATE TABLE audit_pending (
    id   TEXT        COLLATE "C" PRIMARY KEY,
    at   TIMESTAMPTZ NOT NULL,
    body BYTEA       NOT NULL
);

CREATE INDEX audit_pending_by_at ON audit_pending (at);
