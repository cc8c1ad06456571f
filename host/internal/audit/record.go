package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors of this package; callers test them with errors.Is. They come
// wrapped with context.
var (
	// ErrInvalid: a record or filter breaks a rule stated on its type; the
	// message says which. Nothing was written.
	ErrInvalid = errors.New("invalid audit input")
	// ErrQueueFull: the writer's queue is at its bound; the record was
	// dropped and counted (Stats.Dropped).
	ErrQueueFull = errors.New("audit queue full")
	// ErrTokenShare: the record's token has its share of the writer's
	// queue waiting (WriterConfig.TokenShare); the record was dropped
	// and counted. It is an ErrQueueFull.
	ErrTokenShare = fmt.Errorf("%w: this token's share of it is used up", ErrQueueFull)
	// ErrClosed: the writer is closed; the record was not taken.
	ErrClosed = errors.New("audit writer closed")
)

// Decision says whether the gate let a call through.
type Decision string

const (
	Admitted Decision = "admitted"
	Refused  Decision = "refused"
)

// Outcome is how an admitted call ended; empty for a refused one.
type Outcome string

const (
	OutcomeOK            Outcome = "ok"
	OutcomeToolError     Outcome = "tool_error"
	OutcomeInternalError Outcome = "internal_error"
	// OutcomeHeld: the call waits for a human (ApprovalID names the
	// request); nothing ran. Its run, once approved, is a record of its
	// own.
	OutcomeHeld Outcome = "held"
	// OutcomeAsked: the caller's user was asked to confirm the call in
	// band (ApprovalID names the question); nothing ran. The call that
	// answers it is a record of its own with the same ApprovalID.
	OutcomeAsked Outcome = "asked"
)

// Bounds on a record's fields, in bytes. A longer value is cut at a UTF-8
// boundary and ends with Cut, so a record is never lost for a long field;
// Args over MaxArgs is replaced by a placeholder (see Record.Args).
const (
	MaxIDLen         = 64   // ID, ParentID
	MaxRequestIDLen  = 128  // RequestID
	MaxProtocolLen   = 32   // Protocol, ProtocolVersion, Scope, Step, Outcome's codes
	MaxLabelLen      = 128  // TokenLabel, Role, Plugin, ErrorRef
	MaxNameLen       = 255  // UserID, Capability (as idempotency keys them)
	MaxErrorCodeLen  = 64   // ErrorCode
	MaxReasonLen     = 1024 // Reason
	MaxArgs          = 4096 // Args, compact JSON
	Cut              = "…"  // ends a value cut to its bound
	RedactedMarker   = "[redacted]"
	placeholderField = "$audit"
)

// Record is one decision of the gate, as the store keeps it.
type Record struct {
	// Seq is the store's position of the record: assigned on append,
	// increasing in commit order, never reused. It is the paging and
	// following cursor (Filter.After); ignored by Append.
	Seq int64
	// ID identifies the record: NewID's form, time-ordered. The writer
	// assigns one when it is empty; a caller that must link nested calls
	// to this one takes it from NewID before the call runs.
	ID string
	// ParentID is the ID of the call this one was made from (llm.ask's
	// record for the platform.search it called); empty for a top-level
	// call.
	ParentID string
	// Time is when the gate decided, kept in UTC to the microsecond; the
	// writer sets it when zero.
	Time time.Time

	RequestID       string
	Protocol        string // "mcp", …
	ProtocolVersion string
	// TokenLabel is the token's label from the config, never the token.
	TokenLabel string
	Role       string
	Scope      string
	UserID     string // empty for a token bound to nobody

	Capability string // required
	Plugin     string
	// Args are the call's arguments, already redacted by the caller (see
	// Redact): valid JSON, or empty. Invalid JSON, or JSON over MaxArgs
	// once compacted, is stored as a placeholder object
	// {"$audit":"invalid"|"truncated","bytes":N} with N the size given.
	Args json.RawMessage

	Decision Decision // required
	// Step is the refusing step ("permission", "audit", …): set for a
	// refused call, empty for an admitted one.
	Step   string
	Reason string
	// Outcome is set for an admitted call and empty for a refused one.
	Outcome Outcome
	// ErrorCode names the tool error's code (OutcomeToolError), ErrorRef
	// the internal error's reference (OutcomeInternalError).
	ErrorCode string
	ErrorRef  string
	Latency   time.Duration // not negative
	// ApprovalID links the records of a call held for a human: the call
	// that was held, the decision on it, and its run once approved.
	ApprovalID string
}

// validate checks the rules a bounded value cannot repair: the decision,
// the outcome and their agreement.
func (r *Record) validate() error {
	if r.Capability == "" {
		return fmt.Errorf("%w: record has no capability", ErrInvalid)
	}
	if r.Latency < 0 {
		return fmt.Errorf("%w: record of %s has negative latency %v", ErrInvalid, clip(r.Capability), r.Latency)
	}
	switch r.Decision {
	case Admitted:
		if r.Step != "" {
			return fmt.Errorf("%w: admitted record of %s names refusing step %q", ErrInvalid, clip(r.Capability), clip(r.Step))
		}
		switch r.Outcome {
		case OutcomeOK, OutcomeToolError, OutcomeInternalError, OutcomeHeld, OutcomeAsked, OutcomeInterrupted:
		default:
			return fmt.Errorf("%w: admitted record of %s has outcome %q; want ok, tool_error, internal_error, held, asked or interrupted", ErrInvalid, clip(r.Capability), clip(string(r.Outcome)))
		}
	case Refused:
		if r.Step == "" {
			return fmt.Errorf("%w: refused record of %s names no step", ErrInvalid, clip(r.Capability))
		}
		if r.Outcome != "" {
			return fmt.Errorf("%w: refused record of %s has outcome %q; want none", ErrInvalid, clip(r.Capability), clip(string(r.Outcome)))
		}
	default:
		return fmt.Errorf("%w: record of %s has decision %q; want admitted or refused", ErrInvalid, clip(r.Capability), clip(string(r.Decision)))
	}
	return nil
}

// clip bounds caller input quoted in a message.
func clip(s string) string { return bound(s, 64) }

// normalize brings r within its bounds: every string valid UTF-8 without
// NUL (which PostgreSQL text refuses) and at most its bound, the time UTC
// to the microsecond, Args compact valid JSON within MaxArgs. After
// validate and normalize, every engine stores r.
func (r *Record) normalize() {
	r.Time = r.Time.UTC().Truncate(time.Microsecond)
	for i, f := range fieldsOf(r) {
		*f = bound(*f, fieldBounds[i])
	}
	r.Args = capArgs(r.Args, MaxArgs)
}

// fieldBounds are the bounds of the fields fieldsOf lists, in its order.
// Decision and Outcome, checked against their few values, are within
// theirs.
var fieldBounds = [numFields]int{
	MaxIDLen, MaxIDLen, MaxRequestIDLen, MaxProtocolLen, MaxProtocolLen, MaxLabelLen,
	MaxLabelLen, MaxProtocolLen, MaxNameLen, MaxNameLen, MaxLabelLen, MaxProtocolLen, MaxProtocolLen, MaxReasonLen,
	MaxProtocolLen, MaxErrorCodeLen, MaxLabelLen, MaxIDLen,
}

// bound returns s as valid UTF-8 without NUL, cut at a rune boundary to at
// most max bytes, Cut included, when longer.
func bound(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= max {
		return s
	}
	n := max - len(Cut)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Cut
}

// capArgs returns args compacted, or a placeholder when they are not one
// valid JSON value in valid UTF-8 or are longer than max once compacted.
// Empty (or all-space) args stay empty.
func capArgs(args json.RawMessage, max int) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return nil
	}
	if !utf8.Valid(args) {
		return placeholder("invalid", len(args))
	}
	// Arguments usually arrive compact: with no whitespace at all, checking
	// them is enough, and they are kept as they are (a record is encoded,
	// and so copied, as soon as it is normalized).
	if bytes.IndexAny(args, " \t\r\n") < 0 {
		switch {
		case !json.Valid(args):
			return placeholder("invalid", len(args))
		case len(args) > max:
			return placeholder("truncated", len(args))
		}
		return args
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return placeholder("invalid", len(args))
	}
	if buf.Len() > max {
		return placeholder("truncated", buf.Len())
	}
	return buf.Bytes()
}

// placeholder stands for arguments not kept: why, and their size.
func placeholder(why string, size int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{%q:%q,"bytes":%d}`, placeholderField, why, size))
}
