// Package confirm seals and opens the state of the questions the gate
// puts to a caller's user before a call at risk review_required runs (the
// gate's in-band confirmation, dispatch.Confirmer), and of the rounds of a
// call that asks its caller's client for input (dispatch.InputSealer): a
// round's state carries the plugin's own, and is bound to its call the
// same way.
//
// The state travels with the client between the question and the call
// that answers it, so the client holds it and may alter it. It is sealed
// with HMAC-SHA256 under a key only the host knows, and names everything
// the answer may be used for: the question's ID, the token and user it
// was asked of, the capability, the SHA-256 of the arguments, and when it
// lapses. Opening it checks each of those against the call that brings
// it, and then records its ID as answered in a store every replica
// shares, so a state answers one call, once, wherever it lands. The seal
// protects integrity only: the state is readable, and holds nothing the
// caller does not already know.
package confirm

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/internal/dispatch"
)

// MinKeyBytes is the shortest key a Sealer takes.
const MinKeyBytes = 32

// MaxStateBytes bounds a state: a question's is far shorter, a round's
// carries its plugin's state (at most dispatch.MaxInputStateBytes), and a
// longer one sent back is refused before anything is decoded.
const MaxStateBytes = 24 << 10

// DefaultTTL is how long a question waits for its answer unless
// configured otherwise.
const DefaultTTL = 10 * time.Minute

// maxShownArgs bounds the arguments a question shows its user.
const maxShownArgs = 600

// version starts every state, and is part of what the key signs.
const version = "cf1"

// Used records the questions answered, for every replica at once.
type Used interface {
	// Use records id as answered until expires, and reports whether it
	// was the first to.
	Use(ctx context.Context, id string, expires time.Time) (first bool, err error)
}

// Sealer is the host's dispatch.Confirmer.
type Sealer struct {
	key  []byte
	ttl  time.Duration
	used Used
	now  func() time.Time
}

var _ dispatch.Confirmer = (*Sealer)(nil)

// New returns a Sealer signing with key (at least MinKeyBytes), whose
// questions lapse after ttl, recording answers in used.
func New(key []byte, ttl time.Duration, used Used) (*Sealer, error) {
	switch {
	case len(key) < MinKeyBytes:
		return nil, fmt.Errorf("confirmation key has %d bytes; it needs at least %d", len(key), MinKeyBytes)
	case ttl < time.Second:
		return nil, fmt.Errorf("confirmation ttl %s: must be at least a second", ttl)
	case used == nil:
		return nil, errors.New("confirmation: no store of answered questions")
	}
	return &Sealer{key: append([]byte(nil), key...), ttl: ttl, used: used, now: time.Now}, nil
}

// WithClock makes s read the time from now; tests move it.
func (s *Sealer) WithClock(now func() time.Time) *Sealer { s.now = now; return s }

// claims are what a state says, each checked when it comes back.
type claims struct {
	ID         string `json:"id"`
	Token      string `json:"tok"`
	UserID     string `json:"usr,omitempty"`
	Capability string `json:"cap"`
	ArgsSHA256 string `json:"args"` // hex
	Expires    int64  `json:"exp"`  // Unix seconds
	// Kind is empty for the gate's question, kindInput for a round of a
	// call that asked its caller's client; the fields below are a round's.
	Kind      string `json:"k,omitempty"`
	Confirmed string `json:"cf,omitempty"`
	Plugin    []byte `json:"ps,omitempty"`
	Round     int    `json:"r,omitempty"`
}

// kindInput marks the state of a round.
const kindInput = "in"

var _ dispatch.InputSealer = (*Sealer)(nil)

// bind is the claims every state makes about the call it belongs to.
func (s *Sealer) bind(q dispatch.Question, prefix string) claims {
	digest := sha256.Sum256(q.Args)
	return claims{
		ID: prefix + strings.ToLower(rand.Text()), Token: q.Principal.Token, UserID: q.Principal.UserID,
		Capability: q.Capability, ArgsSHA256: hex.EncodeToString(digest[:]), Expires: s.now().Add(s.ttl).Truncate(time.Second).Unix(),
	}
}

// seal signs c into a state.
func (s *Sealer) seal(c claims) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	state := version + "." + body + "." + base64.RawURLEncoding.EncodeToString(s.mac(body))
	if len(state) > MaxStateBytes {
		// Only a principal or capability name near its bound, or a
		// plugin's state near its, gets here.
		return "", fmt.Errorf("the state would be %d bytes, over %d", len(state), MaxStateBytes)
	}
	return state, nil
}

// Ask implements dispatch.Confirmer.
func (s *Sealer) Ask(_ context.Context, q dispatch.Question) (dispatch.Asked, error) {
	c := s.bind(q, "cf_")
	state, err := s.seal(c)
	if err != nil {
		return dispatch.Asked{}, fmt.Errorf("seal confirmation: %w", err)
	}
	exp := time.Unix(c.Expires, 0).UTC()
	return dispatch.Asked{ID: c.ID, State: state, ExpiresAt: exp, Message: message(q, exp)}, nil
}

// SealInput implements dispatch.InputSealer: a round's state is bound to
// its call as a question's is, and carries the plugin's own state.
func (s *Sealer) SealInput(_ context.Context, q dispatch.Question, in dispatch.InputState) (string, dispatch.InputState, error) {
	c := s.bind(q, "in_")
	c.Kind, c.Confirmed, c.Plugin, c.Round = kindInput, in.Confirmed, in.Plugin, in.Round
	state, err := s.seal(c)
	if err != nil {
		return "", in, fmt.Errorf("seal round: %w", err)
	}
	in.ID, in.ExpiresAt = c.ID, time.Unix(c.Expires, 0).UTC()
	return state, in, nil
}

// OpenInput implements dispatch.InputSealer.
func (s *Sealer) OpenInput(ctx context.Context, state string, q dispatch.Question) (dispatch.InputState, error) {
	c, err := s.open(state)
	if err != nil {
		return dispatch.InputState{}, err
	}
	if c.Kind != kindInput {
		return dispatch.InputState{}, dispatch.ErrNotInputState
	}
	if err := s.check(ctx, c, q, "round"); err != nil {
		return dispatch.InputState{}, err
	}
	return dispatch.InputState{ID: c.ID, Confirmed: c.Confirmed, Plugin: c.Plugin, Round: c.Round,
		ExpiresAt: time.Unix(c.Expires, 0).UTC()}, nil
}

// message is the question the user reads: what runs, with what, and what
// each answer does. Values the capability marks sensitive are not shown.
func message(q dispatch.Question, exp time.Time) string {
	args := string(audit.Redact(q.Args, q.Sensitive, 0))
	if len(args) > maxShownArgs {
		n := maxShownArgs
		for n > 0 && !utf8.RuneStart(args[n]) {
			n--
		}
		args = args[:n] + "…"
	}
	if args == "" || args == "{}" {
		args = "no arguments"
	}
	return fmt.Sprintf("Confirm before it runs: %s with %s. This server marks it %s, so it runs only with your yes. "+
		"Accept to run it once, as you; decline to cancel it. The question lapses at %s.",
		q.Capability, args, q.Risk, exp.Format(time.RFC3339))
}

func (s *Sealer) mac(body string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(version + "."))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// refuse is a state the gate cannot accept, and why, for the caller.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", dispatch.ErrConfirmationState, fmt.Sprintf(format, args...))
}

// Answered implements dispatch.Confirmer.
func (s *Sealer) Answered(ctx context.Context, state string, q dispatch.Question) (string, error) {
	c, err := s.open(state)
	if err != nil {
		return "", err
	}
	if c.Kind != "" {
		return "", refuse("the state is a round's, not a confirmation's; call again to be asked anew")
	}
	if err := s.check(ctx, c, q, "confirmation"); err != nil {
		return "", err
	}
	return c.ID, nil
}

// check holds the claims of an opened state to the call that brings it
// back, then uses the state up: what names it in the messages.
func (s *Sealer) check(ctx context.Context, c claims, q dispatch.Question, what string) error {
	now := s.now()
	digest := sha256.Sum256(q.Args)
	switch exp := time.Unix(c.Expires, 0); {
	case !now.Before(exp):
		return refuse("the %s lapsed at %s; call again to be asked anew", what, exp.UTC().Format(time.RFC3339))
	case c.Token != q.Principal.Token || c.UserID != q.Principal.UserID:
		return refuse("the %s was asked of another token; call again to be asked anew", what)
	case c.Capability != q.Capability:
		return refuse("the %s was asked about another capability; call again to be asked anew", what)
	case c.ArgsSHA256 != hex.EncodeToString(digest[:]):
		return refuse("the %s was asked about other arguments; call again with the arguments it was asked about, or to be asked anew", what)
	}
	first, err := s.used.Use(ctx, c.ID, time.Unix(c.Expires, 0))
	if err != nil {
		return fmt.Errorf("record %s %s as answered: %w", what, c.ID, err)
	}
	if !first {
		return refuse("the %s %s was answered before, and answers one call once; call again to be asked anew", what, c.ID)
	}
	return nil
}

// open checks state's seal and reads its claims.
func (s *Sealer) open(state string) (claims, error) {
	bad := refuse("the confirmation state is not one this server made (altered, truncated or sealed under another key); call again to be asked anew")
	if len(state) > MaxStateBytes {
		return claims{}, bad
	}
	v, rest, ok := strings.Cut(state, ".")
	body, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || v != version {
		return claims{}, bad
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, s.mac(body)) {
		return claims{}, bad
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return claims{}, bad
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil || c.ID == "" || c.Expires == 0 {
		// Signed by this key, so only a bug (or a reused key) gets here.
		return claims{}, bad
	}
	return c, nil
}
