-- The plan catalogue, users' subscriptions to plans, and the seeds applied.
-- PostgreSQL form of sqlite/0001_plans_subscriptions.sql: times are
-- timestamptz, and ids compare byte by byte (COLLATE "C"), as in SQLite, so
-- every listing comes out in the same order whatever the database's locale.

CREATE TABLE plans (
    id          TEXT    COLLATE "C" PRIMARY KEY,
    name        TEXT    NOT NULL CHECK (name <> ''),
    description TEXT    NOT NULL DEFAULT '',
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    currency    TEXT    NOT NULL CHECK (length(currency) = 3),
    period      TEXT    NOT NULL CHECK (period IN ('month', 'year'))
);

CREATE TABLE subscriptions (
    id                 TEXT        COLLATE "C" PRIMARY KEY,
    plan_id            TEXT        COLLATE "C" NOT NULL REFERENCES plans (id),
    user_id            TEXT        COLLATE "C" NOT NULL CHECK (user_id <> ''),
    -- The plan's period when the user subscribed: the terms agreed then.
    period             TEXT        NOT NULL CHECK (period IN ('month', 'year')),
    status             TEXT        NOT NULL CHECK (status IN ('active', 'cancelled')),
    started_at         TIMESTAMPTZ NOT NULL,
    current_period_end TIMESTAMPTZ NOT NULL,
    -- NULL while no cancellation is asked for; when it ends (or ended).
    cancel_at          TIMESTAMPTZ,
    CHECK (current_period_end > started_at),
    CHECK (status = 'active' OR cancel_at IS NOT NULL)
);

-- At most one active subscription per user and plan. This index, not
-- application code, decides which of two racing subscribes wins, across any
-- number of replicas.
CREATE UNIQUE INDEX subscriptions_one_active_per_plan
    ON subscriptions (user_id, plan_id)
    WHERE status = 'active';

CREATE INDEX subscriptions_by_user ON subscriptions (user_id, started_at);

-- Seeds applied to this database, so a seed runs once and never again.
-- Named for the vertical: booking keeps its own seeds table, and both may
-- share one PostgreSQL schema.
CREATE TABLE subscription_seeds (
    name       TEXT        PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL
);
