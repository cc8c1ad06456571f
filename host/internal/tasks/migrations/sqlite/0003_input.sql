-- A task that waits on its client (status input_required): the requests
-- it asked, under the IDs its client answers (unique over the task's
-- life), the answers that came so far, the round's sealed state and the
-- call to run again once every request is answered. All four are set
-- while a task waits and cleared when it leaves input_required.
-- input_round counts the times it waited; input_version grows with every
-- change to the four, so that a change is made only by a writer that saw
-- the version before it (two answers racing on two replicas resume the
-- call once).

ALTER TABLE tasks ADD COLUMN input_round INTEGER NOT NULL DEFAULT 0 CHECK (input_round >= 0);
ALTER TABLE tasks ADD COLUMN input_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN input_requests BLOB;
ALTER TABLE tasks ADD COLUMN input_answers BLOB;
ALTER TABLE tasks ADD COLUMN input_state TEXT;
ALTER TABLE tasks ADD COLUMN input_call BLOB
    CHECK ((status = 'input_required') = (input_requests IS NOT NULL AND input_state IS NOT NULL AND input_call IS NOT NULL));
