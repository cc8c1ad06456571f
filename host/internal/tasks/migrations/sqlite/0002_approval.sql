-- approval_id: the approval request of a call held for a human, whose
-- task follows the request until the approved call has run (or the
-- request was rejected or expired); empty for a task that ran at once.

ALTER TABLE tasks ADD COLUMN approval_id TEXT NOT NULL DEFAULT '';
