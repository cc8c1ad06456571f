-- Idempotency records: one per (user, key). A record is pending while its
-- claimer runs the action (lease_until bounds how long the claim is
-- honoured), then done with the outcome kept for replay until expires_at.
-- Times are fixed-width RFC 3339 UTC text, which sorts as the time does.

CREATE TABLE idempotency_records (
    user_id         TEXT    NOT NULL CHECK (length(user_id) BETWEEN 1 AND 255),
    idempotency_key TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    capability      TEXT    NOT NULL CHECK (capability <> ''),
    -- SHA-256 over the capability and the canonical arguments.
    fingerprint     BLOB    NOT NULL CHECK (length(fingerprint) = 32),
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'done')),
    -- The current claim's nonce: only its holder may complete or release.
    token           TEXT    NOT NULL CHECK (token <> ''),
    -- 1 for a first claim; one more for each takeover of a stale claim.
    attempt         INTEGER NOT NULL CHECK (attempt >= 1),
    created_at      TEXT    NOT NULL,
    expires_at      TEXT    NOT NULL,
    lease_until     TEXT,
    outcome_kind    TEXT    CHECK (outcome_kind IN ('result', 'tool_error')),
    error_code      INTEGER CHECK (error_code BETWEEN 1 AND 255),
    -- The result's JSON bytes, or the tool error's message (NULL: empty).
    outcome         BLOB,
    PRIMARY KEY (user_id, idempotency_key),
    CHECK (expires_at > created_at),
    CHECK (lease_until IS NULL OR (lease_until > created_at AND lease_until <= expires_at)),
    CHECK ((state = 'pending' AND lease_until IS NOT NULL
               AND outcome_kind IS NULL AND error_code IS NULL AND outcome IS NULL)
        OR (state = 'done' AND lease_until IS NULL
               AND ((outcome_kind = 'result' AND error_code IS NULL AND outcome IS NOT NULL)
                 OR (outcome_kind = 'tool_error' AND error_code IS NOT NULL))))
) STRICT;

-- Purge deletes by expiry.
CREATE INDEX idempotency_records_by_expiry ON idempotency_records (expires_at);
