-- PostgreSQL form of sqlite/0004_shown_and_bounded.sql. Held calls keep
-- their arguments two ways: args_shown, redacted of every value the
-- capability marks sensitive, is what every view shows; args, exactly as
-- sent, only while the call may still run (pending, approved, running),
-- cleared when it has run, was rejected or expired. args_key (SHA-256 of
-- the canonical arguments) joins an identical pending request instead of
-- storing a second one, and pending_slot bounds a user's pending requests:
-- both are unique among pending requests, so replicas agree without
-- talking. Requests stored before have no redacted copy (views show them
-- withheld), and their settled ones lose their raw arguments now.

ALTER TABLE approvals ALTER COLUMN args DROP NOT NULL;
ALTER TABLE approvals ADD COLUMN args_shown BYTEA;
ALTER TABLE approvals ADD COLUMN args_key BYTEA CHECK (args_key IS NULL OR octet_length(args_key) = 32);
ALTER TABLE approvals ADD COLUMN pending_slot INTEGER CHECK (pending_slot IS NULL OR pending_slot >= 0);

UPDATE approvals SET args = NULL WHERE status NOT IN ('pending', 'approved', 'running');
ALTER TABLE approvals ADD CONSTRAINT approvals_args_while_runnable
    CHECK (args IS NULL OR status IN ('pending', 'approved', 'running'));

CREATE UNIQUE INDEX approvals_pending_call ON approvals (token_label, user_id, capability, args_key)
    WHERE status = 'pending' AND args_key IS NOT NULL;
CREATE UNIQUE INDEX approvals_pending_slot ON approvals (user_id, pending_slot)
    WHERE status = 'pending' AND pending_slot IS NOT NULL;
