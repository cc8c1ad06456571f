package mcp

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// Canonical header keys, indexed directly into http.Header to skip the
// canonicalisation Get does on every call.
const (
	hdrAccept          = "Accept"
	hdrContentType     = "Content-Type"
	hdrOrigin          = "Origin"
	hdrProtocolVersion = "Mcp-Protocol-Version"
	hdrMethod          = "Mcp-Method"
	hdrName            = "Mcp-Name"
)

func header(h http.Header, key string) (string, bool) {
	v := h[key]
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// mediaTypeIs reports whether the media range s (parameters allowed) names
// want, case-insensitively.
func mediaTypeIs(s, want string) bool {
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	return strings.EqualFold(strings.TrimSpace(s), want)
}

// accepts reports what the Accept header values allow: application/json
// and text/event-stream, counting wildcards and honouring q=0 (which means
// "not acceptable"). No Accept header at all means anything is acceptable
// (RFC 9110 §12.5.1); an empty one is read the same way, as clients that
// send it mean no preference rather than "nothing".
func accepts(values []string) (jsonOK, sseOK bool) {
	empty := true
	for _, v := range values {
		if strings.TrimSpace(v) != "" {
			empty = false
			break
		}
	}
	if empty {
		return true, true
	}
	for _, v := range values {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			typ, params, _ := strings.Cut(item, ";")
			if refused(params) {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(typ)) {
			case "*/*":
				jsonOK, sseOK = true, true
			case "application/*", "application/json":
				jsonOK = true
			case "text/*", "text/event-stream":
				sseOK = true
			}
		}
	}
	return jsonOK, sseOK
}

// refused reports a media-range parameter list carrying q=0.
func refused(params string) bool {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(p, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "" || v[0] != '0' {
			return false
		}
		return strings.Trim(v[1:], ".0") == ""
	}
	return false
}

// decodeHeaderValue undoes the "=?base64?...?=" sentinel a client uses for
// header values that are not plain ASCII (2026-07-28 Streamable HTTP, value
// encoding). Other values are returned as they are.
func decodeHeaderValue(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, true
	}
	raw, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(raw), true
}
