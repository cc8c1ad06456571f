package stdio

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Kind names what went wrong when a message could not be forwarded.
type Kind string

// The kinds of Problem.
const (
	// Unreachable: nothing answered at the URL's address (connection
	// refused, a name that does not resolve, a network error).
	Unreachable Kind = "unreachable"
	// TLSFailed: the TLS handshake failed (a certificate not trusted or
	// for another name, or no TLS spoken there).
	TLSFailed Kind = "tls"
	// NotCapgate: something answered, but not capgate's MCP endpoint.
	NotCapgate Kind = "not_capgate"
	// TokenRefused: capgate does not take the token.
	TokenRefused Kind = "token"
	// Redirected: the URL redirects elsewhere; the bridge does not follow.
	Redirected Kind = "redirect"
	// TimedOut: no answer within the bridge's timeout.
	TimedOut Kind = "timeout"
	// TooLarge: the message, or the answer, exceeds a bound.
	TooLarge Kind = "too_large"
	// Unavailable: capgate is there but cannot serve now (503, 429, 5xx).
	Unavailable Kind = "unavailable"
	// BadAnswer: the answer is not MCP (not JSON-RPC, or cut short).
	BadAnswer Kind = "bad_answer"
)

// CodeBridge is the JSON-RPC error code of a request the bridge could not
// forward, or whose answer it could not read. It lies outside the range
// JSON-RPC reserves, as the MCP specification asks of codes that are not
// its own, so that no client mistakes it for an error of capgate's; the
// error's data names the Kind.
const CodeBridge = -31000

// Problem is why a message could not be forwarded, said for a human: what
// is wrong and what to do about it, in one line.
type Problem struct {
	Kind    Kind
	Message string
}

func (p *Problem) Error() string { return p.Message }

// transportProblem explains a failed round trip to the URL.
func (b *Bridge) transportProblem(err error) *Problem {
	host := b.url.Host
	var (
		dnsErr   *net.DNSError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		verify   *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &Problem{TimedOut, fmt.Sprintf("capgate at %s did not answer within %s: is it overloaded, or is the address right? (the bridge's -timeout sets the wait)", b.shown, b.opts.Timeout)}
	case errors.As(err, &dnsErr):
		return &Problem{Unreachable, fmt.Sprintf("cannot reach capgate at %s: the name %q does not resolve (%s): check the host in the URL", b.shown, dnsErr.Name, dnsErrText(dnsErr))}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &Problem{Unreachable, fmt.Sprintf("cannot reach capgate at %s: nothing listens on %s (connection refused): start it (capgate serve -c FILE), or fix the port in the URL", b.shown, host)}
	case errors.As(err, &unknown), errors.As(err, &verify) && errors.As(verify.Err, &unknown):
		return &Problem{TLSFailed, fmt.Sprintf("cannot reach capgate at %s: its TLS certificate is not signed by an authority this machine trusts: give the bridge its CA certificate (-cacert FILE)", b.shown)}
	case errors.As(err, &hostname):
		return &Problem{TLSFailed, fmt.Sprintf("cannot reach capgate at %s: its TLS certificate is not for %q (%v): use the name the certificate is for", b.shown, b.url.Hostname(), hostname.Error())}
	case errors.As(err, &invalid):
		return &Problem{TLSFailed, fmt.Sprintf("cannot reach capgate at %s: its TLS certificate is not valid (%v)", b.shown, invalid.Error())}
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return &Problem{TLSFailed, fmt.Sprintf("cannot reach capgate at %s: %s does not speak TLS: if capgate serves plain http there, the URL starts with http://", b.shown, host)}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Problem{Unreachable, fmt.Sprintf("capgate at %s closed the connection without answering: is it restarting, or is %s another kind of server?", b.shown, host)}
	}
	// *url.Error repeats the method and the URL in Go's quoting; say them
	// once.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &Problem{Unreachable, fmt.Sprintf("cannot reach capgate at %s: %v", b.shown, err)}
}

func dnsErrText(e *net.DNSError) string {
	if e.IsNotFound {
		return "no such host"
	}
	if e.IsTimeout {
		return "the lookup timed out"
	}
	return e.Err
}

// statusProblem explains an answer that carries no JSON-RPC message.
// body is at most a few KiB of it.
func (b *Bridge) statusProblem(ctx context.Context, resp *http.Response, body []byte) *Problem {
	code := resp.StatusCode
	switch {
	case code == http.StatusUnauthorized:
		return b.unauthorized(resp.Header.Values("Www-Authenticate"))
	case code == http.StatusForbidden:
		if ch := parseChallenge(resp.Header.Values("Www-Authenticate")); ch.err == "insufficient_scope" {
			msg := fmt.Sprintf("capgate at %s refused the token in %s (403 insufficient_scope): the token lacks a scope this endpoint needs", b.shown, TokenEnv)
			if ch.scope != "" {
				msg += fmt.Sprintf(" (%s)", clip(ch.scope))
			}
			return &Problem{TokenRefused, msg + ": get one that carries it"}
		}
		return &Problem{TokenRefused, fmt.Sprintf("capgate at %s answered 403 Forbidden: %s", b.shown, bodyHint(body))}
	case code == http.StatusNotFound:
		return b.notFound(ctx)
	case code >= 300 && code < 400:
		if loc := resp.Header.Get("Location"); loc != "" {
			if to, err := b.url.Parse(loc); err == nil {
				return &Problem{Redirected, fmt.Sprintf("%s redirects to %s, which the bridge does not follow (the token goes only where the URL says): set the URL to it if that is capgate", b.shown, redact(to))}
			}
		}
		return &Problem{Redirected, fmt.Sprintf("%s answered %d, a redirect without a place to go: is this capgate's MCP endpoint?", b.shown, code)}
	case code == http.StatusMethodNotAllowed:
		return &Problem{NotCapgate, fmt.Sprintf("%s does not take POST (405): it is not an MCP endpoint; capgate's is at the path %s", b.shown, mcpPath)}
	case code == http.StatusRequestEntityTooLarge:
		return &Problem{TooLarge, fmt.Sprintf("capgate at %s refused the message as too large (413): send less, or raise http.max_body_bytes there", b.shown)}
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return &Problem{Unavailable, fmt.Sprintf("capgate at %s is busy or not ready (%d): retry in a moment", b.shown, code)}
	case code == http.StatusBadGateway || code == http.StatusGatewayTimeout:
		return &Problem{Unavailable, fmt.Sprintf("a proxy in front of capgate at %s could not reach it (%d): is capgate running?", b.shown, code)}
	case code >= 500:
		return &Problem{Unavailable, fmt.Sprintf("capgate at %s failed (%d): its log says why", b.shown, code)}
	}
	return &Problem{NotCapgate, fmt.Sprintf("%s answered %d without a JSON-RPC message: is this capgate's MCP endpoint? (%s)", b.shown, code, bodyHint(body))}
}

// bodyHint is the start of a body that is text, for a message.
func bodyHint(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return "an empty body"
	}
	const max = 120
	if len(s) > max {
		s = s[:max] + "…"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return fmt.Sprintf("a body of %d bytes that is not text", len(body))
		}
	}
	return fmt.Sprintf("%q", s)
}

// unauthorized explains a 401: a resource server asking for a (valid)
// OAuth access token, as RFC 6750 and RFC 9728 shape the challenge.
func (b *Bridge) unauthorized(challenges []string) *Problem {
	ch := parseChallenge(challenges)
	msg := fmt.Sprintf("capgate at %s refused the token in %s (401", b.shown, TokenEnv)
	if ch.err != "" {
		msg += " " + clip(ch.err)
	}
	if ch.desc != "" {
		msg += ": " + clip(ch.desc)
	}
	msg += ")"
	if ch.err != "" {
		msg += ": it is neither a token of capgate's config nor an access token it takes now (expired, or for another server); check it, or get a new access token"
	} else {
		msg += ": it wants an access token"
	}
	if ch.metadata != "" {
		msg += fmt.Sprintf(" from the authorization server %s names", clip(ch.metadata))
	}
	return &Problem{TokenRefused, msg}
}

// challenge is what the bridge reads of a Bearer WWW-Authenticate
// challenge.
type challenge struct {
	err, desc, scope, metadata string
}

// parseChallenge reads the auth-params of the Bearer challenge among the
// header values (RFC 9110 §11.6.1: scheme, then name=value pairs, values
// tokens or quoted strings).
func parseChallenge(values []string) challenge {
	var c challenge
	for _, v := range values {
		rest, ok := cutScheme(v, "bearer")
		if !ok {
			continue
		}
		for rest != "" {
			rest = strings.TrimLeft(rest, " \t,")
			name, after, ok := strings.Cut(rest, "=")
			if !ok {
				break
			}
			name = strings.ToLower(strings.TrimSpace(name))
			after = strings.TrimLeft(after, " \t")
			var val string
			if strings.HasPrefix(after, `"`) {
				val, rest = unquote(after[1:])
			} else {
				end := strings.IndexAny(after, ", \t")
				if end < 0 {
					end = len(after)
				}
				val, rest = after[:end], after[end:]
			}
			switch name {
			case "error":
				c.err = val
			case "error_description":
				c.desc = val
			case "scope":
				c.scope = val
			case "resource_metadata":
				c.metadata = val
			}
		}
		return c
	}
	return c
}

// cutScheme returns what follows the auth scheme when v starts with it.
func cutScheme(v, scheme string) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	rest := v[len(scheme):]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	return rest, true
}

// unquote reads a quoted-string whose opening quote is consumed, returning
// its value and what follows its closing quote.
func unquote(s string) (string, string) {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				sb.WriteByte(s[i])
			}
		case '"':
			return sb.String(), s[i+1:]
		default:
			sb.WriteByte(s[i])
		}
	}
	return sb.String(), ""
}

// notFound explains a 404 without a JSON-RPC body. capgate answers every
// request it does not let in, and every path it does not serve, with the
// same plain 404, so the answer alone cannot tell a wrong token from a
// wrong address; capgate's health check, which answers anyone, can.
func (b *Bridge) notFound(ctx context.Context) *Problem {
	health := b.healthURL()
	if b.isCapgate(ctx, health) {
		if !strings.HasSuffix(strings.TrimSuffix(b.url.Path, "/"), mcpPath) {
			return &Problem{NotCapgate, fmt.Sprintf("capgate answers at %s, but %s is not its MCP endpoint (404): the path is %s", redact(b.url.ResolveReference(&url.URL{Path: "/"})), b.shown, mcpPath)}
		}
		return &Problem{TokenRefused, fmt.Sprintf("capgate at %s does not accept the token in %s (404, its answer to a token it does not know): check the token, which the server's tokens list must hold (as token_sha256 or token), or that the server is not switched off (enabled: false)", b.shown, TokenEnv)}
	}
	return &Problem{NotCapgate, fmt.Sprintf("%s answered 404 and %s is no capgate health check: is this capgate's address? Its MCP endpoint is at the path %s", b.shown, health, mcpPath)}
}

// healthURL is where capgate's health check would be, were the URL its MCP
// endpoint: the same prefix, /healthz instead of /api/v1/mcp.
func (b *Bridge) healthURL() string {
	prefix, ok := strings.CutSuffix(strings.TrimSuffix(b.url.Path, "/"), mcpPath)
	if !ok {
		prefix = ""
	}
	u := url.URL{Scheme: b.url.Scheme, Host: b.url.Host, Path: prefix + "/healthz"}
	return u.String()
}

// isCapgate reports whether url answers as capgate's health check does:
// 200 or 503 with a JSON object holding a status.
func (b *Bridge) isCapgate(ctx context.Context, target string) bool {
	ctx, cancel := context.WithTimeout(ctx, min(b.opts.Timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", b.ua)
	resp, err := b.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return false
	}
	var h struct {
		Status string `json:"status"`
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h) == nil && h.Status != ""
}
