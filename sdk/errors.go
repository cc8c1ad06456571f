package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// toolError is a failure the calling agent can act on. It reaches the agent
// as a tool result flagged as an error, with the message as its text.
type toolError struct {
	code capgatev1.ToolError_Code
	msg  string
}

func (e *toolError) Error() string { return e.msg }

// NotFound reports that the target of the call does not exist. Say what was
// looked for, so the agent can correct the id.
func NotFound(format string, args ...any) error {
	return &toolError{capgatev1.ToolError_CODE_NOT_FOUND, fmt.Sprintf(format, args...)}
}

// InvalidInput reports arguments that are well-formed but wrong; say what a
// valid value looks like.
func InvalidInput(format string, args ...any) error {
	return &toolError{capgatev1.ToolError_CODE_INVALID_INPUT, fmt.Sprintf(format, args...)}
}

// Conflict reports a valid call that the current state forbids, such as a
// slot someone else has booked.
func Conflict(format string, args ...any) error {
	return &toolError{capgatev1.ToolError_CODE_CONFLICT, fmt.Sprintf(format, args...)}
}

// Unavailable reports that the call could not run now and did nothing (a
// service it needs is down); the agent may retry the same call later.
func Unavailable(format string, args ...any) error {
	return &toolError{capgatev1.ToolError_CODE_UNAVAILABLE, fmt.Sprintf(format, args...)}
}

// asToolError finds a tool error in err's chain.
func asToolError(err error) (*capgatev1.ToolError, bool) {
	var te *toolError
	if errors.As(err, &te) {
		return &capgatev1.ToolError{Code: te.code, Message: te.msg}, true
	}
	return nil, false
}

func decodeStrict(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("plugin config: %w", err)
	}
	return nil
}

// IsNotFound reports whether err is, or wraps, a NotFound failure, such as
// the one Env.Record returns for an id its provider does not know.
func IsNotFound(err error) bool {
	var te *toolError
	return errors.As(err, &te) && te.code == capgatev1.ToolError_CODE_NOT_FOUND
}
