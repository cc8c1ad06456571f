-- In-band confirmations (host/internal/confirm). PostgreSQL form of
-- sqlite/0002_confirmations.sql: confirmations_answered holds the ID of
-- every question answered, until it lapses, so a state answers one call
-- once across every replica; approval_keys holds the key that seals the
-- states when the configuration names none, made once, so replicas agree.

CREATE TABLE confirmations_answered (
    id         TEXT        COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX confirmations_answered_by_expiry ON confirmations_answered (expires_at);

CREATE TABLE approval_keys (
    name TEXT  NOT NULL PRIMARY KEY,
    key  BYTEA NOT NULL CHECK (octet_length(key) >= 32)
);
