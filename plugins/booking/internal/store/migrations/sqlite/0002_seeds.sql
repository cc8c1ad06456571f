-- Seeds applied to this database, so a seed runs once and never again.

CREATE TABLE seeds (
    name       TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
);
