-- The operator's runtime switches, shared by every replica on the same
-- database: one row per switch ("actions"). off is 1 while the switch
-- holds its capabilities off; changed_at is unix milliseconds.
CREATE TABLE capgate_switches (
    name       TEXT    NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    off        INTEGER NOT NULL CHECK (off IN (0, 1)),
    changed_at INTEGER NOT NULL,
    changed_by TEXT    NOT NULL CHECK (length(changed_by) <= 128)
);
