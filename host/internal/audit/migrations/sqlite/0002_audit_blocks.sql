-- Records move into blocks: one row per append of up to 512 records,
-- encoded together (see block.go), which costs the host a small fraction
-- of a row and six index entries per record. The store converts the rows
-- of audit_records_v1 into blocks when it opens, then drops the table.

CREATE TABLE audit_blocks (
    -- The seqs of the block's first and last record.
    first_seq INTEGER PRIMARY KEY,
    last_seq  INTEGER NOT NULL CHECK (last_seq >= first_seq),
    records   INTEGER NOT NULL CHECK (records > 0),
    -- The span of the records' times, in audit_records' text form.
    min_time  TEXT    NOT NULL CHECK (length(min_time) = 27),
    max_time  TEXT    NOT NULL CHECK (length(max_time) = 27 AND max_time >= min_time),
    -- The values the exact-match filters select, each between two 0x1F.
    keys      TEXT    NOT NULL,
    body      BLOB    NOT NULL
) STRICT;

-- Retention deletes the blocks wholly older than its cut-off.
CREATE INDEX audit_blocks_by_max_time ON audit_blocks (max_time);

-- The last seq handed out: appends take their range from it, so seqs are
-- never reused even once retention has emptied the store.
CREATE TABLE audit_sequence (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    last INTEGER NOT NULL CHECK (last >= 0)
) STRICT;
INSERT INTO audit_sequence (one, last)
    VALUES (1, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'audit_records'), 0));

DROP INDEX audit_records_by_time;
DROP INDEX audit_records_by_token;
DROP INDEX audit_records_by_user;
DROP INDEX audit_records_by_capability;
DROP INDEX audit_records_by_decision;
DROP INDEX audit_records_by_request;
ALTER TABLE audit_records RENAME TO audit_records_v1;
