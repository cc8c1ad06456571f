-- Bookable resources and the bookings made on them.
-- PostgreSQL form of sqlite/0001_resources_bookings.sql: times are timestamptz,
-- and ids compare byte by byte (COLLATE "C"), as in SQLite, so every listing
-- comes out in the same order whatever the database's locale.

CREATE TABLE resources (
    id            TEXT    COLLATE "C" PRIMARY KEY,
    name          TEXT    NOT NULL CHECK (name <> ''),
    kind          TEXT    NOT NULL CHECK (kind <> ''),
    description   TEXT    NOT NULL DEFAULT '',
    location      TEXT    NOT NULL DEFAULT '',
    capacity      INTEGER NOT NULL CHECK (capacity >= 1),
    slot_minutes  INTEGER NOT NULL CHECK (slot_minutes BETWEEN 5 AND 1440),
    opens_minute  INTEGER NOT NULL CHECK (opens_minute >= 0),
    closes_minute INTEGER NOT NULL CHECK (closes_minute <= 1440),
    CHECK (closes_minute - opens_minute >= slot_minutes)
);

CREATE TABLE bookings (
    id           TEXT        COLLATE "C" PRIMARY KEY,
    resource_id  TEXT        COLLATE "C" NOT NULL REFERENCES resources (id),
    user_id      TEXT        COLLATE "C" NOT NULL CHECK (user_id <> ''),
    starts_at    TIMESTAMPTZ NOT NULL,
    ends_at      TIMESTAMPTZ NOT NULL,
    status       TEXT        NOT NULL CHECK (status IN ('active', 'cancelled')),
    created_at   TIMESTAMPTZ NOT NULL,
    cancelled_at TIMESTAMPTZ,
    CHECK (ends_at > starts_at),
    CHECK ((status = 'active' AND cancelled_at IS NULL)
        OR (status = 'cancelled' AND cancelled_at IS NOT NULL))
);

-- At most one active booking per slot. This index, not application code,
-- decides which of two racing creates wins, across any number of replicas.
CREATE UNIQUE INDEX bookings_one_active_per_slot
    ON bookings (resource_id, starts_at)
    WHERE status = 'active';

CREATE INDEX bookings_by_user ON bookings (user_id, starts_at);
