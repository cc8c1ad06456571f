-- In-band confirmations (host/internal/confirm). confirmations_answered
-- holds the ID of every question answered, until it lapses, so a state
-- answers one call once across every replica sharing the database.
-- approval_keys holds the key that seals the states when the
-- configuration names none, made once, so replicas agree on it.

CREATE TABLE confirmations_answered (
    id         TEXT NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    expires_at TEXT NOT NULL
);

CREATE INDEX confirmations_answered_by_expiry ON confirmations_answered (expires_at);

CREATE TABLE approval_keys (
    name TEXT NOT NULL PRIMARY KEY,
    key  BLOB NOT NULL CHECK (length(key) >= 32)
);
