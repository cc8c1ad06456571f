// Package answers carries a client's answer to a request that a call sent
// it back to the call waiting for it, on this replica or another.
//
// Before MCP 2026-07-28, a call that needs its client mid-way (a form for
// the user, a completion from the client's model, the client's roots)
// sends a JSON-RPC request of its own on the event stream of the POST it
// is answering, and the client answers in a new POST. capgate keeps no
// session, so that POST may reach any replica. A [Relay] gives each such
// request an id that names the replica whose call waits ([Relay.Await]);
// the replica that receives the answer hands it over ([Relay.Deliver]):
// to a call of its own, or over NATS to the replica the id names, which
// replies whether a call took it. The client thus learns at once whether
// its answer arrived.
//
// An answer is taken once, only while its call waits, and only from the
// caller the request was sent to (the same token and user): anyone else's
// answer under the same id is refused exactly like an answer nobody waits
// for, so an id learns nothing about another caller's calls.
package answers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Caller is whom a request was sent to: only their answer is taken.
type Caller struct {
	// Token is the label of the caller's token (never the token itself).
	Token string
	User  string
}

// Answer is a client's JSON-RPC response to one request: its result or
// its error.
type Answer struct {
	// Result is the response's result; nil when Error is set.
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is the JSON-RPC error a client answered a request with.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Bounds of what a Relay carries.
const (
	// MaxAnswerBytes bounds an answer's result: a filled-in form, a
	// model's message or a list of roots fits in far less.
	MaxAnswerBytes = 256 << 10
	// MaxErrorMessage bounds the message of an error answer, in bytes.
	MaxErrorMessage = 256
)

// DefaultSubject is the NATS subject under which replicas hand answers to
// each other when Options leaves it empty: each replica listens on
// DefaultSubject.<replica>.
const DefaultSubject = "capgate.answers"

// DefaultHandoverTimeout bounds the handover of an answer to another
// replica when Options leaves it unset.
const DefaultHandoverTimeout = 5 * time.Second

// ErrNoCall is the answer to a delivery no call takes: none waits under
// that id (it ended, or it never was), or the answer is not its caller's.
var ErrNoCall = errors.New("no call waits for this answer")

// idPrefix starts every id a Relay hands out; the replica's name and a
// random part follow, separated by '-'.
const idPrefix = "capgate-ask-"

// IsID reports whether id has the form of an id Await hands out. An answer
// under any other id is for no Relay.
func IsID(id string) bool {
	replica, rest, ok := strings.Cut(strings.TrimPrefix(id, idPrefix), "-")
	return strings.HasPrefix(id, idPrefix) && ok && validName(replica) && validName(rest)
}

// validName reports whether s is one of the names randomName makes: what
// may stand in a NATS subject as one token.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// randomName is 26 random base32 letters and digits, lower-cased.
func randomName() string { return strings.ToLower(rand.Text()) }

// Options configures a Relay.
type Options struct {
	// Conn is the NATS connection the replicas share (the event bus's);
	// nil makes a Relay of one replica, whose answers reach only its own
	// calls.
	Conn *nats.Conn
	// Subject is the root the replicas of one deployment share; empty
	// means DefaultSubject. Deployments on one NATS server need their
	// own.
	Subject string
	// HandoverTimeout bounds handing an answer to another replica; zero
	// means DefaultHandoverTimeout.
	HandoverTimeout time.Duration
	// Logger receives what a handover from another replica could not
	// use; nil means slog.Default().
	Logger *slog.Logger
}

// Relay is one replica's end: it hands out ids for the requests its calls
// send, and takes answers for them. It is safe for concurrent use.
type Relay struct {
	replica string
	nc      *nats.Conn
	subject string
	timeout time.Duration
	log     *slog.Logger
	sub     *nats.Subscription

	mu      sync.Mutex
	waiting map[string]waiter
	closed  bool
}

type waiter struct {
	caller Caller
	ch     chan Answer // buffered 1: the one answer never blocks its sender
}

// New returns a Relay, listening for other replicas' handovers on its own
// subject when it has a connection.
func New(o Options) (*Relay, error) {
	r := &Relay{replica: randomName()[:10], nc: o.Conn, subject: o.Subject, timeout: o.HandoverTimeout, log: o.Logger, waiting: map[string]waiter{}}
	if r.subject == "" {
		r.subject = DefaultSubject
	}
	if r.timeout <= 0 {
		r.timeout = DefaultHandoverTimeout
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.nc != nil {
		sub, err := r.nc.Subscribe(r.subject+"."+r.replica, r.handover)
		if err != nil {
			return nil, fmt.Errorf("answers: listen on %s: %w", r.subject, err)
		}
		r.sub = sub
	}
	return r, nil
}

// Replica names this replica in the ids it hands out.
func (r *Relay) Replica() string { return r.replica }

// Await registers a request about to be sent to c's client and returns its
// id, where its answer will arrive, and done, which the call runs once it
// waits no more (an answer arriving after it is refused).
func (r *Relay) Await(c Caller) (id string, answer <-chan Answer, done func()) {
	id = idPrefix + r.replica + "-" + randomName()
	ch := make(chan Answer, 1)
	r.mu.Lock()
	r.waiting[id] = waiter{caller: c, ch: ch}
	r.mu.Unlock()
	return id, ch, func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
	}
}

// Waiting counts the requests whose answers this replica's calls await.
func (r *Relay) Waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waiting)
}

// Deliver hands c's answer a to the call that waits for it under id,
// wherever it waits. It returns ErrNoCall when none takes it, or another
// error when the replica it is for could not be asked.
func (r *Relay) Deliver(ctx context.Context, c Caller, id string, a Answer) error {
	if !IsID(id) {
		return ErrNoCall
	}
	if err := a.check(); err != nil {
		return err
	}
	replica := id[len(idPrefix):]
	replica = replica[:strings.IndexByte(replica, '-')]
	if replica == r.replica {
		if !r.take(c, id, a) {
			return ErrNoCall
		}
		return nil
	}
	if r.nc == nil {
		// One replica alone: the id names one that is not this, so no
		// call here waits for it.
		return ErrNoCall
	}
	b, err := json.Marshal(handover{ID: id, Token: c.Token, User: c.User, Answer: a})
	if err != nil {
		return fmt.Errorf("answers: encode the answer: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	reply, err := r.nc.RequestWithContext(ctx, r.subject+"."+replica, b)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		// The replica is gone, and its calls with it.
		return ErrNoCall
	case err != nil:
		return fmt.Errorf("answers: hand the answer to replica %s: %w", replica, err)
	case string(reply.Data) == replyTaken:
		return nil
	}
	return ErrNoCall
}

// check holds an answer to the bounds before it travels.
func (a Answer) check() error {
	switch {
	case (a.Result == nil) == (a.Error == nil):
		return errors.New("answers: an answer is a result or an error")
	case len(a.Result) > MaxAnswerBytes:
		return fmt.Errorf("answers: the result is %d bytes; at most %d are taken", len(a.Result), MaxAnswerBytes)
	case a.Result != nil && !json.Valid(a.Result):
		return errors.New("answers: the result is not JSON")
	case a.Error != nil && len(a.Error.Message) > MaxErrorMessage:
		return fmt.Errorf("answers: the error message is %d bytes; at most %d are taken", len(a.Error.Message), MaxErrorMessage)
	}
	return nil
}

// take gives a to the call waiting under id for c's answer, if one does.
func (r *Relay) take(c Caller, id string, a Answer) bool {
	r.mu.Lock()
	w, ok := r.waiting[id]
	ok = ok && w.caller == c
	if ok {
		delete(r.waiting, id)
	}
	r.mu.Unlock()
	if ok {
		w.ch <- a
	}
	return ok
}

// handover is an answer on its way to the replica whose call waits.
type handover struct {
	ID     string `json:"id"`
	Token  string `json:"token"`
	User   string `json:"user"`
	Answer Answer `json:"answer"`
}

// The replies to a handover.
const (
	replyTaken  = "taken"
	replyNoCall = "no call"
)

// maxHandoverBytes bounds a handover read off the wire: the answer and
// the envelope around it.
const maxHandoverBytes = MaxAnswerBytes + MaxErrorMessage + 4<<10

// handover takes an answer another replica received for a call here.
func (r *Relay) handover(m *nats.Msg) {
	reply := replyNoCall
	var h handover
	switch {
	case len(m.Data) > maxHandoverBytes:
		r.log.Warn("answers: a handover over its bound was dropped", slog.Int("bytes", len(m.Data)))
	case json.Unmarshal(m.Data, &h) != nil || h.Answer.check() != nil:
		r.log.Warn("answers: an unreadable handover was dropped", slog.Int("bytes", len(m.Data)))
	case r.take(Caller{Token: h.Token, User: h.User}, h.ID, h.Answer):
		reply = replyTaken
	}
	if m.Reply != "" {
		if err := m.Respond([]byte(reply)); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			r.log.Warn("answers: replying to a handover failed", slog.String("err", err.Error()))
		}
	}
}

// Close stops taking handovers from other replicas, and returns once the
// NATS server knows. Calls still waiting get no more answers; their own
// deadlines end them. A nil Relay has nothing to close.
func (r *Relay) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	if r.sub == nil {
		return nil
	}
	if err := r.sub.Unsubscribe(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			return nil
		}
		return fmt.Errorf("answers: stop listening: %w", err)
	}
	// Once the server has it, another replica's handover finds nobody
	// here at once (no responders) instead of waiting out its timeout.
	if err := r.nc.FlushTimeout(r.timeout); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("answers: stop listening: %w", err)
	}
	return nil
}
