package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/dispatch"
)

// TokenPrefix starts every token NewToken makes, so a leaked one is easy
// to recognise in logs and by secret scanners.
const TokenPrefix = "cg_"

// random is the entropy source for NewToken; tests replace it to reach the
// failure path.
var random io.Reader = rand.Reader

// Store authenticates bearer tokens. It is safe for concurrent use, and
// Replace swaps its tokens whole while requests are served. The zero Store
// accepts nothing.
type Store struct {
	tokens atomic.Pointer[tokenSet]
}

// tokenSet is one generation of tokens, never changed once built.
type tokenSet struct {
	// byHash maps a token's SHA-256 to its principal: one lookup per
	// request, whatever the number of tokens. Only hashes are kept.
	//
	// The lookup is not constant-time, and need not be: its timing can tell
	// at most something about the hash of the token presented (which bucket
	// it lands in, how many leading bytes match a stored hash), and the
	// presenter already knows that hash. Learning stored hash bytes this way
	// needs candidates whose SHA-256 matches them, 256^k hashes for k bytes,
	// and even the whole hash yields no token: SHA-256 has no feasible
	// preimage for a token with the entropy NewToken gives.
	byHash map[[sha256.Size]byte]dispatch.Principal
	// byLabel maps a token's label to its principal, for calls the host
	// makes later as a token (an approved call runs as its asker's).
	byLabel map[string]dispatch.Principal
}

// New builds a store from configured tokens. Should two tokens share a hash
// (config.Load refuses that), the later one wins.
func New(tokens []config.Token) *Store {
	s := &Store{}
	s.Replace(tokens)
	return s
}

// Replace makes tokens the ones the store accepts, at once: a request is
// authenticated against the old set or the new, and a token removed is
// refused from the next request on.
func (s *Store) Replace(tokens []config.Token) {
	set := &tokenSet{byHash: make(map[[sha256.Size]byte]dispatch.Principal, len(tokens)), byLabel: make(map[string]dispatch.Principal, len(tokens))}
	for _, t := range tokens {
		p := dispatch.Principal{Role: t.Role, Scope: t.Scope, UserID: t.UserID, Token: t.Label}
		set.byHash[t.SHA256] = p
		set.byLabel[t.Label] = p
	}
	s.tokens.Store(set)
}

// ByLabel returns the principal of the token labelled label, as the
// tokens stand now: false once the token has been removed.
func (s *Store) ByLabel(label string) (dispatch.Principal, bool) {
	set := s.tokens.Load()
	if set == nil {
		return dispatch.Principal{}, false
	}
	p, ok := set.byLabel[label]
	return p, ok
}

// Len returns how many tokens the store accepts (tokens sharing a hash
// count once).
func (s *Store) Len() int {
	if set := s.tokens.Load(); set != nil {
		return len(set.byHash)
	}
	return 0
}

// Authenticate checks an Authorization header value of the form
// "Bearer <token>" and returns the token's principal.
func (s *Store) Authenticate(authorization string) (dispatch.Principal, bool) {
	// bearer runs config.CheckToken first: a malformed or oversized token
	// is refused before any hashing.
	set := s.tokens.Load()
	tok, ok := bearer(authorization)
	if !ok || set == nil || len(set.byHash) == 0 {
		return dispatch.Principal{}, false
	}
	// Copying into a fixed array keeps the hash input on the stack: the
	// []byte(tok) conversion would allocate on every request.
	var buf [config.MaxTokenLength]byte
	n := copy(buf[:], tok)
	p, ok := set.byHash[sha256.Sum256(buf[:n])]
	return p, ok
}

// bearer extracts the token from "Bearer <token>": the scheme in any case,
// one or more spaces, then a token that config.CheckToken accepts.
func bearer(h string) (string, bool) {
	const scheme = "Bearer"
	if len(h) < len(scheme)+2 || !strings.EqualFold(h[:len(scheme)], scheme) || h[len(scheme)] != ' ' {
		return "", false
	}
	tok := strings.TrimLeft(h[len(scheme):], " ")
	if config.CheckToken(tok) != nil {
		return "", false
	}
	return tok, true
}

// NewToken makes a fresh token: "cg_" and 32 random bytes in unpadded
// base64url. It returns the token, to hand to the client once, and its
// SHA-256 in hex, to put in the config as token_sha256.
func NewToken() (token string, sha256hex string, err error) {
	var b [32]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", "", fmt.Errorf("auth: reading random bytes for a new token: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken returns the lower-case hex SHA-256 of token, the form
// token_sha256 takes in the config.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
