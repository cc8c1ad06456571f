-- Idempotency records: one per (user, key). A record is pending while its
-- claimer runs the action (lease_until bounds how long the claim is
-- honoured), then done with the outcome kept for replay until expires_at.
-- PostgreSQL form of sqlite/0001_idempotency_records.sql: times are
-- timestamptz, bytes are bytea, and ids compare byte by byte (COLLATE "C").

CREATE TABLE idempotency_records (
    user_id         TEXT        COLLATE "C" NOT NULL CHECK (length(user_id) BETWEEN 1 AND 255),
    idempotency_key TEXT        COLLATE "C" NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    capability      TEXT        COLLATE "C" NOT NULL CHECK (capability <> ''),
    -- SHA-256 over the capability and the canonical arguments.
    fingerprint     BYTEA       NOT NULL CHECK (octet_length(fingerprint) = 32),
    state           TEXT        NOT NULL CHECK (state IN ('pending', 'done')),
    -- The current claim's nonce: only its holder may complete or release.
    token           TEXT        COLLATE "C" NOT NULL CHECK (token <> ''),
    -- 1 for a first claim; one more for each takeover of a stale claim.
    attempt         INTEGER     NOT NULL CHECK (attempt >= 1),
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    lease_until     TIMESTAMPTZ,
    outcome_kind    TEXT        CHECK (outcome_kind IN ('result', 'tool_error')),
    error_code      SMALLINT    CHECK (error_code BETWEEN 1 AND 255),
    -- The result's JSON bytes, or the tool error's message (NULL: empty).
    outcome         BYTEA,
    PRIMARY KEY (user_id, idempotency_key),
    CHECK (expires_at > created_at),
    CHECK (lease_until IS NULL OR (lease_until > created_at AND lease_until <= expires_at)),
    CHECK ((state = 'pending' AND lease_until IS NOT NULL
               AND outcome_kind IS NULL AND error_code IS NULL AND outcome IS NULL)
        OR (state = 'done' AND lease_until IS NULL
               AND ((outcome_kind = 'result' AND error_code IS NULL AND outcome IS NOT NULL)
                 OR (outcome_kind = 'tool_error' AND error_code IS NOT NULL))))
);

-- Purge deletes by expiry.
CREATE INDEX idempotency_records_by_expiry ON idempotency_records (expires_at);
