-- announced_at: when a host put the request's decision on the event bus
-- (approval.decided). PostgreSQL form of sqlite/0003_announced.sql: a
-- decision made where no bus is (capgate approvals approve|reject) is
-- announced by the first host to find it, once; earlier decisions count as
-- announced.

ALTER TABLE approvals ADD COLUMN announced_at TIMESTAMPTZ;

UPDATE approvals SET announced_at = decided_at WHERE decided_at IS NOT NULL;

CREATE INDEX approvals_unannounced ON approvals (decided_at) WHERE announced_at IS NULL AND decided_at IS NOT NULL;
