package auth

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Bounds of the checked tokens.
const (
	// checkedFor is how long a checked token is taken without checking
	// its signature again, at most; its expiry, and a change of the
	// issuer's keys, end it sooner.
	checkedFor = 5 * time.Minute
	// maxChecked bounds the tokens held, about 3 KiB each.
	maxChecked = 10_000
)

// checkedTokens remembers access tokens whose signature and claims
// passed, by their SHA-256, until their expiry or checkedFor, whichever
// comes first, and only while the keys they were checked with are the
// issuer's current set. Verifying an RS256 signature and the claims costs about
// 120 µs, most of a small call's time; finding the token here, about a
// hash. The zero value is ready.
type checkedTokens struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]checkedToken
}

type checkedToken struct {
	tok   jwt.Token
	keys  *keySet
	until time.Time
}

// get returns the token of sum if it was checked with keys and is still
// good at now.
func (c *checkedTokens) get(sum [sha256.Size]byte, keys *keySet, now time.Time) (jwt.Token, bool) {
	c.mu.Lock()
	e, ok := c.m[sum]
	c.mu.Unlock()
	if !ok || e.keys != keys || !now.Before(e.until) {
		return nil, false
	}
	return e.tok, true
}

// put keeps tok, checked with keys at now, until its expiry (with the clock skew
// the check allows) or checkedFor. When full it forgets what has lapsed,
// and if that frees nothing, everything: the next requests check their
// tokens again, no more.
func (c *checkedTokens) put(sum [sha256.Size]byte, tok jwt.Token, keys *keySet, now time.Time, skew time.Duration) {
	until := now.Add(checkedFor)
	if exp, ok := tok.Expiration(); ok && exp.Add(skew).Before(until) {
		until = exp.Add(skew)
	}
	if !now.Before(until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[sha256.Size]byte]checkedToken)
	}
	if len(c.m) >= maxChecked {
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxChecked {
			clear(c.m)
		}
	}
	c.m[sum] = checkedToken{tok: tok, keys: keys, until: until}
}
