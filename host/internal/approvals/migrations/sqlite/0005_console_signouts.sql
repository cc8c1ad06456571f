-- Console sign-outs (host/internal/console). console_signouts holds a
-- digest of each signed-out session's id until the session would have
-- expired, so its cookie opens nothing on any replica sharing the
-- database, though its signature still holds.

CREATE TABLE console_signouts (
    id         TEXT NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
    expires_at TEXT NOT NULL
);

CREATE INDEX console_signouts_by_expiry ON console_signouts (expires_at);
