-- The plan catalogue, users' subscriptions to plans, and the seeds applied.

CREATE TABLE plans (
    id          TEXT    PRIMARY KEY,
    name        TEXT    NOT NULL CHECK (name <> ''),
    description TEXT    NOT NULL DEFAULT '',
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    currency    TEXT    NOT NULL CHECK (length(currency) = 3),
    period      TEXT    NOT NULL CHECK (period IN ('month', 'year'))
);

CREATE TABLE subscriptions (
    id                 TEXT PRIMARY KEY,
    plan_id            TEXT NOT NULL REFERENCES plans (id),
    user_id            TEXT NOT NULL CHECK (user_id <> ''),
    -- The plan's period when the user subscribed: the terms agreed then.
    period             TEXT NOT NULL CHECK (period IN ('month', 'year')),
    status             TEXT NOT NULL CHECK (status IN ('active', 'cancelled')),
    started_at         TEXT NOT NULL,
    current_period_end TEXT NOT NULL,
    -- NULL while no cancellation is asked for; when it ends (or ended).
    cancel_at          TEXT,
    CHECK (current_period_end > started_at),
    CHECK (status = 'active' OR cancel_at IS NOT NULL)
);

-- At most one active subscription per user and plan. This index, not
-- application code, decides which of two racing subscribes wins, across any
-- number of processes.
CREATE UNIQUE INDEX subscriptions_one_active_per_plan
    ON subscriptions (user_id, plan_id)
    WHERE status = 'active';

CREATE INDEX subscriptions_by_user ON subscriptions (user_id, started_at);

-- Seeds applied to this database, so a seed runs once and never again.
-- Named for the vertical: booking keeps its own seeds table, and both may
-- share one PostgreSQL schema.
CREATE TABLE subscription_seeds (
    name       TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
);
