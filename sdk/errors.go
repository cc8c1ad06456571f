package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// ErrorCode classifies a failure the calling agent can act on.
type ErrorCode int

const (
	// CodeNotFound: the target of the call does not exist.
	CodeNotFound ErrorCode = iota + 1
	// CodeInvalidInput: the arguments are well-formed but wrong.
	CodeInvalidInput
	// CodeConflict: the call is valid but the current state forbids it.
	CodeConflict
	// CodeUnavailable: the call could not run now and did nothing; the
	// same call may succeed later.
	CodeUnavailable
)

func (c ErrorCode) String() string {
	switch c {
	case CodeNotFound:
		return "not found"
	case CodeInvalidInput:
		return "invalid input"
	case CodeConflict:
		return "conflict"
	case CodeUnavailable:
		return "unavailable"
	}
	return fmt.Sprintf("ErrorCode(%d)", int(c))
}

// Error is a failure the calling agent can act on. It reaches the agent as
// a tool result flagged as an error, with Message as its text. Handlers
// create one with NotFound, InvalidInput, Conflict or Unavailable; a nested
// call (Call.Invoke) and package sdktest return the callee's as an *Error
// too, so the same checks (IsNotFound, CodeOf) work everywhere.
type Error struct {
	Code    ErrorCode
	Message string
}

func (e *Error) Error() string { return e.Message }

// NotFound reports that the target of the call does not exist. Say what was
// looked for, so the agent can correct the id.
func NotFound(format string, args ...any) error {
	return &Error{CodeNotFound, fmt.Sprintf(format, args...)}
}

// InvalidInput reports arguments that are well-formed but wrong; say what a
// valid value looks like.
func InvalidInput(format string, args ...any) error {
	return &Error{CodeInvalidInput, fmt.Sprintf(format, args...)}
}

// Conflict reports a valid call that the current state forbids, such as a
// slot someone else has booked.
func Conflict(format string, args ...any) error {
	return &Error{CodeConflict, fmt.Sprintf(format, args...)}
}

// Unavailable reports that the call could not run now and did nothing (a
// service it needs is down); the agent may retry the same call later.
func Unavailable(format string, args ...any) error {
	return &Error{CodeUnavailable, fmt.Sprintf(format, args...)}
}

// CodeOf is the code of the *Error in err's chain, or 0 when there is none.
func CodeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// IsNotFound reports whether err is, or wraps, a NotFound failure, such as
// the one Env.Record returns for an id its provider does not know.
func IsNotFound(err error) bool { return CodeOf(err) == CodeNotFound }

// IsInvalidInput reports whether err is, or wraps, an InvalidInput failure,
// such as the gate's refusal of arguments that break the input schema.
func IsInvalidInput(err error) bool { return CodeOf(err) == CodeInvalidInput }

// Step names the gate step that refused a call.
type Step string

// The gate's steps, in the order it runs them.
const (
	StepPack        Step = "pack"
	StepUserBinding Step = "user_binding"
	StepScope       Step = "scope"
	StepPermission  Step = "permission"
	StepOwnership   Step = "ownership"
)

// RefusedError is the gate refusing a call to its caller: returned by a
// nested call (Call.Invoke) the caller could not have made directly, and
// by package sdktest for every refusal.
type RefusedError struct {
	Capability string
	Step       Step
	Reason     string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s refused at %s: %s", e.Capability, e.Step, e.Reason)
}

// IsRefused reports whether err is, or wraps, a RefusedError.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// RefusedAt is the step of the RefusedError in err's chain, or "" when
// there is none.
func RefusedAt(err error) Step {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Step
	}
	return ""
}

var wireCodes = map[ErrorCode]capgatev1.ToolError_Code{
	CodeNotFound:     capgatev1.ToolError_CODE_NOT_FOUND,
	CodeInvalidInput: capgatev1.ToolError_CODE_INVALID_INPUT,
	CodeConflict:     capgatev1.ToolError_CODE_CONFLICT,
	CodeUnavailable:  capgatev1.ToolError_CODE_UNAVAILABLE,
}

// asWireError finds an *Error in err's chain, as the contract carries it.
func asWireError(err error) (*capgatev1.ToolError, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return nil, false
	}
	code, ok := wireCodes[e.Code]
	if !ok {
		code = capgatev1.ToolError_CODE_INVALID_INPUT
	}
	return &capgatev1.ToolError{Code: code, Message: e.Message}, true
}

// fromWireError is a tool error from the contract as an *Error.
func fromWireError(te *capgatev1.ToolError) *Error {
	for c, w := range wireCodes {
		if w == te.Code {
			return &Error{Code: c, Message: te.Message}
		}
	}
	return &Error{Code: CodeInvalidInput, Message: te.Message}
}

// decodeStrict decodes a config block into v, refusing unknown keys and
// naming every one of them, so a misspelt option is an error at start-up
// rather than silently ignored.
func decodeStrict(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// configKeys lists the keys of a config block, sorted; nil for an empty or
// absent one.
func configKeys(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// unreadConfig is the error for a config block the plugin never read.
func unreadConfig(keys []string) error {
	return fmt.Errorf("plugin config: this plugin reads no config, but its block sets %s: remove them (or, writing the plugin, decode them with sdk.Configure or Env.DecodeConfig)",
		strings.Join(keys, ", "))
}
