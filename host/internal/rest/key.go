package rest

import (
	"net/http"
	"strings"

	"github.com/capgate/capgate/internal/idempotency"
)

// IdempotencyKeyHeader carries an action's idempotency key: the HTTP form
// of MCP's _meta "io.capgate/idempotency-key", with the same meaning.
const IdempotencyKeyHeader = "Idempotency-Key"

// idempotencyKey reads the Idempotency-Key header: a structured-field
// string ("…", RFC 8941, as the IETF draft defines the header) or the key
// bare, as many clients send it. The key must be one the store accepts.
// It returns the key ("" for none) or why the header is refused; the
// message never quotes the header, which is the caller's.
func idempotencyKey(hd http.Header) (string, string) {
	v, ok := hd[IdempotencyKeyHeader]
	if !ok {
		return "", ""
	}
	if len(v) != 1 {
		return "", "send one Idempotency-Key header, not several"
	}
	key, ok := parseKey(v[0])
	if !ok {
		return "", "the Idempotency-Key header is not a valid structured-field string (\"…\", with \\\" and \\\\ the only escapes)"
	}
	if err := idempotency.ValidateKey(key); err != nil {
		return "", "Idempotency-Key: " + strings.TrimPrefix(err.Error(), idempotency.ErrInvalid.Error()+": ")
	}
	return key, ""
}

// parseKey decodes a header value: a structured-field string when it
// starts with a quote, else the value itself (surrounding spaces, which
// HTTP does not count, already trimmed by the server).
func parseKey(v string) (string, bool) {
	v = strings.Trim(v, " \t")
	if v == "" || v[0] != '"' {
		return v, true
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", false
			}
			b.WriteByte(v[i])
		case c == '"':
			// The closing quote ends the value: nothing may follow.
			return b.String(), i == len(v)-1
		case c < ' ' || c > '~':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}
