package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// Errors the store returns; callers test them with errors.Is. They come
// wrapped with context.
var (
	// ErrInvalid: an argument breaks a rule stated on its type or method;
	// the message says which. Nothing was written.
	ErrInvalid = errors.New("invalid idempotency input")
	// ErrOutcomeTooLarge: the outcome is longer than MaxOutcomeSize. Nothing
	// was written and the claim is still held (see Store.Complete).
	ErrOutcomeTooLarge = errors.New("outcome too large to keep")
	// ErrNotHeld: the ticket no longer holds its claim — it was completed or
	// released already, taken over after its lease ran out, or purged after
	// it expired. Nothing was written.
	ErrNotHeld = errors.New("idempotency claim not held")
)

// Limits on what the store accepts.
const (
	// MaxKeyLen is the longest key, in characters. A key is 1 to MaxKeyLen
	// printable ASCII characters other than space ('!' through '~'): enough
	// for a UUID, ULID or any readable name, and safe to echo in messages.
	MaxKeyLen = 255
	// MaxIDLen bounds a user id and a capability name, in bytes.
	MaxIDLen = 255
	// MaxOutcomeSize bounds an outcome's payload (a result's JSON bytes or a
	// tool error's message), in bytes: the largest message the host accepts
	// from a plugin over gRPC by default, so every answer a plugin can give
	// fits.
	MaxOutcomeSize = 4 << 20
	// MinLease is the shortest lease: the store keeps times to the second.
	MinLease = time.Second
)

// Fingerprint identifies a request: SHA-256 over the capability and its
// canonical arguments (see FingerprintOf).
type Fingerprint [sha256.Size]byte

// fingerprintDomain versions the hashed bytes, so a change to the
// canonical form can never make an old fingerprint match a new request.
const fingerprintDomain = "capgate idempotency v1\x00"

// FingerprintOf returns the fingerprint of a call of capability with args.
// Arguments are compared as JSON values, not as text: whitespace and the
// order of object members do not matter, while every value does (numbers
// compare by their literal, so 1 and 1.0 differ). Absent arguments and null
// count as {}, as the gate treats them. Invalid JSON is an ErrInvalid.
func FingerprintOf(capability string, args json.RawMessage) (Fingerprint, error) {
	canon, err := CanonicalJSON(args)
	if err != nil {
		return Fingerprint{}, err
	}
	h := sha256.New()
	h.Write([]byte(fingerprintDomain))
	// Length-prefixed, so no capability/argument split can collide.
	_ = binary.Write(h, binary.BigEndian, uint64(len(capability)))
	h.Write([]byte(capability))
	h.Write(canon)
	var f Fingerprint
	h.Sum(f[:0])
	return f, nil
}

// CanonicalJSON returns args in one canonical form: no insignificant
// whitespace, object members sorted by name, strings re-escaped the one way
// encoding/json writes them, numbers as written. Absent arguments and null
// give {}.
func CanonicalJSON(args json.RawMessage) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	// Numbers keep their literal: float64 would round large integers.
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: arguments are not valid JSON: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: arguments hold more than one JSON value", ErrInvalid)
	}
	// encoding/json sorts map keys, which is the canonical order.
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments: %v", ErrInvalid, err)
	}
	return out, nil
}

// Request is the identity of an action call that carries an idempotency
// key.
type Request struct {
	// UserID is the user the call acts for: keys are scoped per user. 1 to
	// MaxIDLen bytes of UTF-8 without NUL.
	UserID string
	// Key is the caller's idempotency key; see MaxKeyLen.
	Key string
	// Capability is the capability called, 1 to MaxIDLen bytes of UTF-8
	// without NUL.
	Capability string
	// Fingerprint is FingerprintOf(Capability, arguments); the zero value
	// is refused, so a forgotten fingerprint cannot match everything.
	Fingerprint Fingerprint
}

func (r Request) validate() error {
	if err := validateOwner(r.UserID, r.Key); err != nil {
		return err
	}
	if err := validateID("capability", r.Capability); err != nil {
		return err
	}
	if r.Fingerprint == (Fingerprint{}) {
		return fmt.Errorf("%w: fingerprint is unset (use FingerprintOf)", ErrInvalid)
	}
	return nil
}

// validateOwner checks what addresses a record: its user and key.
func validateOwner(userID, key string) error {
	if err := validateID("user id", userID); err != nil {
		return err
	}
	return ValidateKey(key)
}

// ValidateKey reports whether key is one the store accepts (see MaxKeyLen),
// as an ErrInvalid whose message says what is wrong without echoing the
// key. Callers may use it to refuse a bad key before any other work.
func ValidateKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: idempotency key must be 1 to %d characters, got %d bytes", ErrInvalid, MaxKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < '!' || c > '~' {
			return fmt.Errorf("%w: idempotency key byte %d is %#02x; a key holds only printable ASCII characters other than space ('!' through '~')",
				ErrInvalid, i+1, c)
		}
	}
	return nil
}

func validateID(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(s) > MaxIDLen:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalid, what, len(s), MaxIDLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	case bytes.IndexByte([]byte(s), 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	}
	return nil
}

// validateWindow checks a claim's lease and retention.
func validateWindow(lease, retention time.Duration) error {
	switch {
	case lease < MinLease:
		return fmt.Errorf("%w: lease %v is shorter than %v", ErrInvalid, lease, MinLease)
	case retention < lease:
		// A record must outlive its lease, or a crashed claim would vanish
		// before anyone could see it was pending.
		return fmt.Errorf("%w: retention %v is shorter than the lease %v", ErrInvalid, retention, lease)
	}
	return nil
}

// OutcomeKind says what an action's first call answered.
type OutcomeKind string

const (
	// OutcomeResult: the action succeeded with a JSON result.
	OutcomeResult OutcomeKind = "result"
	// OutcomeToolError: the action answered a tool error (the caller's
	// dispatch.ToolError), which a retry must see again too.
	OutcomeToolError OutcomeKind = "tool_error"
)

// Outcome is what a completed call answered, kept for replay.
type Outcome struct {
	Kind OutcomeKind
	// Result is the result's JSON, kept byte for byte (OutcomeResult only):
	// valid JSON of at most MaxOutcomeSize bytes.
	Result json.RawMessage
	// Code is the tool error's code, 1 to 255 (OutcomeToolError only). The
	// store does not interpret it; the caller stores its
	// dispatch.ToolErrorCode, whose numbers thereby become part of the
	// stored format.
	Code uint8
	// Message is the tool error's message, any bytes up to MaxOutcomeSize
	// (OutcomeToolError only).
	Message string
}

// validate reports the first rule o breaks.
func (o Outcome) validate() error {
	switch o.Kind {
	case OutcomeResult:
		switch {
		case len(o.Result) > MaxOutcomeSize:
			return fmt.Errorf("%w: result of %d bytes is longer than %d", ErrOutcomeTooLarge, len(o.Result), MaxOutcomeSize)
		case !json.Valid(o.Result):
			return fmt.Errorf("%w: result is not valid JSON", ErrInvalid)
		case o.Code != 0 || o.Message != "":
			return fmt.Errorf("%w: a result outcome has no tool error code or message", ErrInvalid)
		}
	case OutcomeToolError:
		switch {
		case len(o.Message) > MaxOutcomeSize:
			return fmt.Errorf("%w: tool error message of %d bytes is longer than %d", ErrOutcomeTooLarge, len(o.Message), MaxOutcomeSize)
		case o.Code == 0:
			return fmt.Errorf("%w: a tool error outcome needs a code from 1 to 255", ErrInvalid)
		case o.Result != nil:
			return fmt.Errorf("%w: a tool error outcome has no result", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: outcome kind %q is neither %q nor %q", ErrInvalid, o.Kind, OutcomeResult, OutcomeToolError)
	}
	return nil
}

// ClaimStatus is what Claim decided.
type ClaimStatus uint8

const (
	// Claimed: the caller holds the key and runs the action now, then calls
	// Complete with its outcome, or Release if nothing ran.
	Claimed ClaimStatus = iota + 1
	// Replay: the same request completed before; answer its outcome and run
	// nothing.
	Replay
	// InProgress: the same request holds a live claim; its first attempt is
	// still running (or its host died and the lease has not run out yet).
	// Run nothing; the caller may retry after LeaseUntil.
	InProgress
	// Mismatch: the key was used for a different request within the
	// retention window; refuse the call. Differs says what differs.
	Mismatch
)

func (s ClaimStatus) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Replay:
		return "replay"
	case InProgress:
		return "in_progress"
	case Mismatch:
		return "mismatch"
	}
	return fmt.Sprintf("ClaimStatus(%d)", uint8(s))
}

// Difference is what a Mismatch found different from the first request.
type Difference uint8

const (
	// DiffersCapability: the key was first used for another capability.
	DiffersCapability Difference = iota + 1
	// DiffersArguments: same capability, other arguments.
	DiffersArguments
)

func (d Difference) String() string {
	switch d {
	case DiffersCapability:
		return "capability"
	case DiffersArguments:
		return "arguments"
	}
	return fmt.Sprintf("Difference(%d)", uint8(d))
}

// Ticket is a held claim: what Complete and Release need.
type Ticket struct {
	UserID, Key string
	// Token is the claim's nonce; a takeover issues a new one, so a stale
	// claimer's ticket stops working.
	Token string
}

// maxTokenLen bounds a ticket's token; Claim issues shorter ones.
const maxTokenLen = 64

func (t Ticket) validate() error {
	if err := validateOwner(t.UserID, t.Key); err != nil {
		return err
	}
	if t.Token == "" || len(t.Token) > maxTokenLen {
		return fmt.Errorf("%w: ticket token must be the one Claim returned", ErrInvalid)
	}
	return nil
}

// ClaimResult is Claim's answer. Which fields are set depends on Status.
type ClaimResult struct {
	Status ClaimStatus
	// Ticket (Claimed) holds the claim.
	Ticket Ticket
	// Attempt (Claimed) is 1 for a first claim, n > 1 when n-1 earlier
	// claims of the same request ran out of lease: their host may have run
	// the action, so this run may repeat it.
	Attempt int
	// Outcome (Replay) is the first call's outcome.
	Outcome Outcome
	// LeaseUntil (InProgress) is when the running claim's lease ends.
	LeaseUntil time.Time
	// Differs (Mismatch) says what differs, and Capability is the
	// capability the key was first used for.
	Differs    Difference
	Capability string
}
