package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A task that waits on its client: its call asked (elicitation, sampling,
// roots), so it parks in input_required with the requests, the round's
// sealed state and the call to run again; its client answers with
// tasks/update, on any replica, and the answer that completes the set
// resumes the call there, once. Everything a resumption needs is in the
// row, so no replica keeps anything of a waiting task in memory.

// Bounds of what a waiting task holds.
const (
	// MaxRequests bounds the requests of one round.
	MaxRequests = 16
	// MaxRequestsBytes bounds a round's requests, encoded: each request's
	// params are bounded by the gate (64 KiB), and a margin.
	MaxRequestsBytes = 2 << 20
	// MaxAnswerBytes bounds one answer, MaxAnswersBytes all of a round's
	// answers kept so far: a client's answers arrive over several
	// tasks/update, each bounded by the request body, so the row needs a
	// bound of its own.
	MaxAnswerBytes  = 1 << 20
	MaxAnswersBytes = 4 << 20
	// MaxStateBytes bounds the sealed state of a round (the host seals at
	// most 32 KiB).
	MaxStateBytes = 64 << 10
	// MaxCallBytes bounds the call kept to run again: its arguments and
	// request metadata, each already bounded by the request body.
	MaxCallBytes = 8 << 20
	// MaxKey bounds a request's key as its call asked it.
	MaxKey = 64
)

// ErrBusy: a change lost every race it ran against other writers of the
// same task; the caller may try again.
var ErrBusy = errors.New("the task changed under every attempt")

// Request is one request a waiting task puts to its client.
type Request struct {
	// ID is what the client answers it under: minted by the store from
	// the round and Key, so it is unique over the task's life even when a
	// call asks under the same key in two rounds (an SDK handler asks
	// under fixed keys), as the extension requires of request IDs.
	ID string `json:"id"`
	// Key is what the call asked it under, and reads its answer under.
	Key    string          `json:"key"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// requestID is the ID of the request asked under key in round.
func requestID(round int, key string) string { return "r" + strconv.Itoa(round) + "-" + key }

// Park is a call's round that asked its client.
type Park struct {
	// Requests are asked in this order; their IDs are minted by Park.
	Requests []Request
	// State is the sealed state the call is run again with.
	State string
	// Call is what runs again once every request is answered, as the
	// adapter encodes it.
	Call []byte
	// Message is the status message while the task waits.
	Message string
}

func (p Park) encode(round int) ([]byte, error) {
	switch {
	case len(p.Requests) == 0:
		return nil, fmt.Errorf("%w: a round that asks nothing", ErrInvalid)
	case len(p.Requests) > MaxRequests:
		return nil, fmt.Errorf("%w: %d requests in a round, over %d", ErrInvalid, len(p.Requests), MaxRequests)
	case p.State == "" || len(p.State) > MaxStateBytes || !utf8.ValidString(p.State):
		return nil, fmt.Errorf("%w: a round's state is 1 to %d bytes of UTF-8", ErrInvalid, MaxStateBytes)
	case len(p.Call) == 0 || len(p.Call) > MaxCallBytes:
		return nil, fmt.Errorf("%w: a call of %d bytes to run again; 1 to %d", ErrInvalid, len(p.Call), MaxCallBytes)
	}
	if err := checkMessage(p.Message); err != nil {
		return nil, err
	}
	reqs := make([]Request, len(p.Requests))
	seen := make(map[string]bool, len(p.Requests))
	for i, r := range p.Requests {
		switch {
		case len(r.Key) > MaxKey || !keyPattern.MatchString(r.Key):
			return nil, fmt.Errorf("%w: request key %q is not 1 to %d letters, digits, '_', '-' or '.'", ErrInvalid, clip(r.Key), MaxKey)
		case seen[r.Key]:
			return nil, fmt.Errorf("%w: request key %q asked twice", ErrInvalid, r.Key)
		case r.Method == "" || len(r.Method) > MaxField || !utf8.ValidString(r.Method):
			return nil, fmt.Errorf("%w: request %q names no method", ErrInvalid, r.Key)
		case len(r.Params) == 0 || r.Params[0] != '{' || !json.Valid(r.Params):
			return nil, fmt.Errorf("%w: request %q: params must be a JSON object", ErrInvalid, r.Key)
		}
		seen[r.Key] = true
		reqs[i] = Request{ID: requestID(round, r.Key), Key: r.Key, Method: r.Method, Params: r.Params}
	}
	b, err := json.Marshal(reqs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(b) > MaxRequestsBytes {
		return nil, fmt.Errorf("%w: a round's requests take %d bytes, over %d", ErrInvalid, len(b), MaxRequestsBytes)
	}
	return b, nil
}

// Park moves the working task id, whose run of round round (its Round
// when the run began) asked its client, to input_required with p: the
// requests, under IDs minted for round+1, the sealed state and the call.
// It reports whether it parked the task: false when the task is no
// longer that run's (cancelled, swept, or already parked), and p is
// dropped.
func (s *Store) Park(ctx context.Context, id string, round int, p Park) (bool, error) {
	if round < 0 {
		return false, fmt.Errorf("park task: %w: round %d", ErrInvalid, round)
	}
	reqs, err := p.encode(round + 1)
	if err != nil {
		return false, fmt.Errorf("park task: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = 'input_required', status_message = $3, updated_ms = $4,
		input_round = input_round + 1, input_version = input_version + 1,
		input_requests = $5, input_answers = NULL, input_state = $6, input_call = $7
		WHERE id = $1 AND status = 'working' AND input_round = $2 AND approval_id = ''`,
		id, round, p.Message, s.clock(), reqs, p.State, p.Call)
	if err != nil {
		return false, fmt.Errorf("park task: %w", err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("park task: %w", err)
	}
	return k == 1, nil
}

// Resume is a waiting task whose every request is answered: the call to
// run again, as the task's owner, once.
type Resume struct {
	ID         string
	Owner      Owner
	Capability string
	// Round is the task's Round now, which the resumed run parks with.
	Round int
	State string
	Call  []byte
	// Answers are keyed as the call asked (Request.Key).
	Answers map[string]json.RawMessage
}

// waiting is a waiting task's requests and the answers so far, by ID.
type waiting struct {
	requests []Request
	answers  map[string]json.RawMessage
}

func decodeWaiting(requests, answers []byte) (waiting, error) {
	var w waiting
	if err := json.Unmarshal(requests, &w.requests); err != nil {
		return w, fmt.Errorf("stored requests: %w", err)
	}
	if answers != nil {
		if err := json.Unmarshal(answers, &w.answers); err != nil {
			return w, fmt.Errorf("stored answers: %w", err)
		}
	}
	return w, nil
}

func (w waiting) pending() []Request {
	out := make([]Request, 0, len(w.requests))
	for _, r := range w.requests {
		if _, ok := w.answers[r.ID]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// maxAttempts bounds the reads and conditional writes one Answer makes
// while other writers change the task under it.
const maxAttempts = 16

// Answer keeps o's answers to the requests task id waits on, keyed by
// request ID, each a JSON object of at most MaxAnswerBytes. Answers to
// IDs not outstanding (never asked, answered already, of an earlier
// round) are ignored, as the extension asks, and so is every answer to a
// task that waits on nothing. It returns a Resume when this call answered
// the last outstanding request: the task is working again and the caller
// runs the call, which no other Answer will hand out. ErrNotFound as for
// Get; ErrInvalid for an answer over its bound, or answers over theirs.
func (s *Store) Answer(ctx context.Context, o Owner, id string, answers map[string]json.RawMessage) (*Resume, error) {
	for k, v := range answers {
		if len(v) > MaxAnswerBytes || len(v) == 0 || v[0] != '{' || !json.Valid(v) {
			return nil, fmt.Errorf("answer task: %w: the answer to %q is not a JSON object of at most %d bytes", ErrInvalid, clip(k), MaxAnswerBytes)
		}
	}
	for range maxAttempts {
		r, done, err := s.answerOnce(ctx, o, id, answers)
		if err != nil || done {
			return r, err
		}
	}
	return nil, fmt.Errorf("answer task %s: %w", clip(id), ErrBusy)
}

// answerOnce reads the task and writes what answers make of it, on the
// condition that no one changed it in between; done is false when someone
// did, and the caller reads again.
func (s *Store) answerOnce(ctx context.Context, o Owner, id string, answers map[string]json.RawMessage) (r *Resume, done bool, err error) {
	var (
		status, capability string
		round              int
		version            int64
		requests, stored   []byte
		state              sql.NullString
		call               []byte
	)
	now := s.clock()
	err = s.db.QueryRowContext(ctx, `SELECT status, capability, input_round, input_version, input_requests, input_answers, input_state, input_call
		FROM tasks WHERE id = $1 AND token_label = $2 AND user_id = $3 AND expires_ms > $4`, id, o.TokenLabel, o.UserID, now).
		Scan(&status, &capability, &round, &version, &requests, &stored, &state, &call)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, true, fmt.Errorf("%w: %q", ErrNotFound, clip(id))
	}
	if err != nil {
		return nil, true, fmt.Errorf("answer task: read: %w", err)
	}
	if Status(status) != InputRequired || requests == nil {
		return nil, true, nil
	}
	w, err := decodeWaiting(requests, stored)
	if err != nil {
		return nil, true, fmt.Errorf("answer task %s: %w", id, err)
	}
	if w.answers == nil {
		w.answers = map[string]json.RawMessage{}
	}
	added := 0
	for _, req := range w.requests {
		v, ok := answers[req.ID]
		if _, had := w.answers[req.ID]; ok && !had {
			w.answers[req.ID] = v
			added++
		}
	}
	if added == 0 {
		return nil, true, nil
	}
	if len(w.answers) < len(w.requests) {
		b, err := json.Marshal(w.answers)
		if err != nil {
			return nil, true, fmt.Errorf("answer task: %w", err)
		}
		if len(b) > MaxAnswersBytes {
			return nil, true, fmt.Errorf("answer task: %w: the answers would take %d bytes, over %d", ErrInvalid, len(b), MaxAnswersBytes)
		}
		ok, err := s.changeWaiting(ctx, id, version, `input_answers = $3, updated_ms = $4`, b, now)
		return nil, ok, err
	}
	// The last request is answered: the task works again, and the call
	// is handed to whichever writer made that change.
	byKey := make(map[string]json.RawMessage, len(w.requests))
	total := 0
	for _, req := range w.requests {
		byKey[req.Key] = w.answers[req.ID]
		total += len(w.answers[req.ID])
	}
	if total > MaxAnswersBytes {
		return nil, true, fmt.Errorf("answer task: %w: the answers would take %d bytes, over %d", ErrInvalid, total, MaxAnswersBytes)
	}
	ok, err := s.changeWaiting(ctx, id, version, `status = 'working', status_message = '', updated_ms = $3, `+noInput, now)
	if err != nil || !ok {
		return nil, ok, err
	}
	return &Resume{ID: id, Owner: o, Capability: capability, Round: round, State: state.String, Call: call, Answers: byKey}, true, nil
}

// noInput clears what a waiting task holds: set whenever a task leaves
// input_required.
const noInput = `input_version = input_version + 1, input_requests = NULL, input_answers = NULL, input_state = NULL, input_call = NULL`

// changeWaiting applies set to the waiting task id if its input is still
// at version; false when another writer changed it first. args are $3
// on.
func (s *Store) changeWaiting(ctx context.Context, id string, version int64, set string, args ...any) (bool, error) {
	if !strings.Contains(set, "input_version") {
		set += `, input_version = input_version + 1`
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET `+set+`
		WHERE id = $1 AND status = 'input_required' AND input_version = $2`, append([]any{id, version}, args...)...)
	if err != nil {
		return false, fmt.Errorf("answer task: %w", err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("answer task: %w", err)
	}
	return k == 1, nil
}

// Discard deletes the working task id that no one was told of: a call
// whose first answer was to ask its client while its caller still waited
// asks on the call itself, and its task never existed for the client. It
// reports whether it deleted the task; one that waited, ended or follows
// an approval is kept.
func (s *Store) Discard(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM tasks WHERE id = $1 AND status = 'working' AND input_round = 0 AND approval_id = ''`, id)
	if err != nil {
		return false, fmt.Errorf("discard task: %w", err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("discard task: %w", err)
	}
	return k == 1, nil
}

// Follow makes the working task id follow the approval request
// approvalID: its resumed call was held for a human, and the request now
// says how it ends. It reports whether the task was working.
func (s *Store) Follow(ctx context.Context, id, approvalID, msg string) (bool, error) {
	if approvalID == "" {
		return false, fmt.Errorf("follow approval: %w: no approval id", ErrInvalid)
	}
	if err := checkField("approval id", approvalID); err != nil {
		return false, fmt.Errorf("follow approval: %w", err)
	}
	if err := checkMessage(msg); err != nil {
		return false, fmt.Errorf("follow approval: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET approval_id = $2, status_message = $3, updated_ms = $4
		WHERE id = $1 AND status = 'working' AND approval_id = ''`, id, approvalID, msg, s.clock())
	if err != nil {
		return false, fmt.Errorf("follow approval: %w", err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("follow approval: %w", err)
	}
	return k == 1, nil
}
