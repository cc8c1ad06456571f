package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CookieName is the session cookie's name.
const CookieName = "capgate_console"

// DefaultSessionTTL is how long a session lasts from sign-in, however
// busy: a working day, after which the token is typed again.
const DefaultSessionTTL = 8 * time.Hour

// MinKeyBytes is the shortest signing key the console takes.
const MinKeyBytes = 32

// maxCookieBytes bounds a cookie the console reads: its own are about 150
// bytes, and anything longer is not one of them.
const maxCookieBytes = 512

// Domain separators: each use of the key signs its own kind of message,
// so no signature made for one can be replayed as another.
const (
	macSession     = "capgate console session v1\x00"
	macCSRF        = "capgate console csrf v1\x00"
	macFingerprint = "capgate console token v1\x00"
)

// session is a signed-in browser: which token it stands for, until when,
// and the form token its pages carry.
type session struct {
	Label   string
	Issued  time.Time
	Expires time.Time
	// nonce makes each sign-in's session, and so its CSRF token, its own.
	nonce string
	// fingerprint ties the session to the token's secret as it was at
	// sign-in: a token given a new secret under the same label ends it.
	fingerprint string
	// CSRF is the form token of this session, derived from its nonce.
	CSRF string
}

// Why a cookie is not a session; the page says which, the log too.
var (
	errNoSession   = errors.New("not signed in")
	errBadSession  = errors.New("the session cookie is not one this console signed")
	errExpired     = errors.New("the session has expired")
	errTokenGone   = errors.New("the session's token is no longer configured, or no longer of scope admin")
	errTokenRekeys = errors.New("the session's token has been given a new secret")
)

// sessions signs and opens session cookies with one key, which every
// replica sharing the database holds (approvals.Store.SessionKey).
type sessions struct {
	key []byte
	ttl time.Duration
}

func newSessions(key []byte, ttl time.Duration) (*sessions, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("console: a session key of %d bytes; want at least %d", len(key), MinKeyBytes)
	}
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessions{key: append([]byte(nil), key...), ttl: ttl}, nil
}

func (s *sessions) mac(domain string, parts ...string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(domain))
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// fingerprint is what a session keeps of its token: a keyed digest of the
// token's SHA-256, which says nothing of the token to whoever reads the
// cookie, yet changes when the token's secret does.
func (s *sessions) fingerprint(tokenSHA256 [32]byte) string {
	return b64(s.mac(macFingerprint, string(tokenSHA256[:]))[:16])
}

// issue makes the session of a sign-in and its cookie value:
// base64url(payload) "." base64url(HMAC(payload)). The payload is
// label|issued|expires|nonce|fingerprint; labels never hold '|'.
func (s *sessions) issue(label string, tokenSHA256 [32]byte, now time.Time) (session, string) {
	n := make([]byte, 16)
	_, _ = rand.Read(n) // crypto/rand.Read never fails
	ss := session{Label: label, Issued: now, Expires: now.Add(s.ttl), nonce: b64(n), fingerprint: s.fingerprint(tokenSHA256)}
	ss.CSRF = s.csrf(ss.nonce)
	payload := strings.Join([]string{label, strconv.FormatInt(now.Unix(), 10), strconv.FormatInt(ss.Expires.Unix(), 10), ss.nonce, ss.fingerprint}, "|")
	return ss, b64([]byte(payload)) + "." + b64(s.mac(macSession, payload))
}

// open checks a cookie value's signature and lifetime. Whether its token
// still stands is the caller's to ask (Console.session).
func (s *sessions) open(value string, now time.Time) (session, error) {
	if value == "" {
		return session{}, errNoSession
	}
	if len(value) > maxCookieBytes {
		return session{}, errBadSession
	}
	enc, sig, ok := strings.Cut(value, ".")
	if !ok {
		return session{}, errBadSession
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(enc)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(macSession, string(payload))) {
		return session{}, errBadSession
	}
	f := strings.Split(string(payload), "|")
	if len(f) != 5 || f[0] == "" || f[3] == "" || f[4] == "" {
		return session{}, errBadSession
	}
	issued, err1 := strconv.ParseInt(f[1], 10, 64)
	expires, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return session{}, errBadSession
	}
	ss := session{Label: f[0], Issued: time.Unix(issued, 0), Expires: time.Unix(expires, 0), nonce: f[3], fingerprint: f[4]}
	// A session is never longer than the console issues, whatever a key
	// once signed; and one issued in the future is a clock gone wrong.
	if !now.Before(ss.Expires) || ss.Expires.Sub(ss.Issued) > s.ttl || ss.Issued.After(now.Add(time.Minute)) {
		return session{}, errExpired
	}
	ss.CSRF = s.csrf(ss.nonce)
	return ss, nil
}

// csrf is the form token of the session with nonce: derived, not stored,
// so every replica computes the same one.
func (s *sessions) csrf(nonce string) string { return b64(s.mac(macCSRF, nonce)) }

// checkCSRF says whether a form's token is the session's.
func (ss session) checkCSRF(got string) bool {
	return got != "" && hmac.Equal([]byte(got), []byte(ss.CSRF))
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
