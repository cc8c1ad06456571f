-- Bookable resources and the bookings made on them.

CREATE TABLE resources (
    id            TEXT    PRIMARY KEY,
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
    id           TEXT PRIMARY KEY,
    resource_id  TEXT NOT NULL REFERENCES resources (id),
    user_id      TEXT NOT NULL CHECK (user_id <> ''),
    starts_at    TEXT NOT NULL,
    ends_at      TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'cancelled')),
    created_at   TEXT NOT NULL,
    cancelled_at TEXT,
    CHECK (ends_at > starts_at),
    CHECK ((status = 'active' AND cancelled_at IS NULL)
        OR (status = 'cancelled' AND cancelled_at IS NOT NULL))
);

-- At most one active booking per slot. This index, not application code,
-- decides which of two racing creates wins, across any number of processes.
CREATE UNIQUE INDEX bookings_one_active_per_slot
    ON bookings (resource_id, starts_at)
    WHERE status = 'active';

CREATE INDEX bookings_by_user ON bookings (user_id, starts_at);
