package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwt"
)

// TestCheckedTokensBound: the held tokens never pass maxChecked; a full
// set first forgets what has lapsed, and forgets everything only when
// nothing has. A token already expired, or checked with other keys, is
// not taken.
func TestCheckedTokensBound(t *testing.T) {
	now := time.Now()
	keys, other := &keySet{}, &keySet{}
	tok := func(exp time.Time) jwt.Token {
		tk, err := jwt.NewBuilder().Expiration(exp).Build()
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	sum := func(i int) (s [sha256.Size]byte) {
		binary.BigEndian.PutUint64(s[:], uint64(i))
		return s
	}
	var c checkedTokens
	short, long := tok(now.Add(time.Second)), tok(now.Add(time.Hour))
	for i := range maxChecked {
		c.put(sum(i), short, keys, now, 0)
	}
	// A second later every one has lapsed: one more takes the room of all.
	later := now.Add(2 * time.Second)
	c.put(sum(-1), long, keys, later, 0)
	if n := len(c.m); n != 1 {
		t.Fatalf("after lapsed tokens were forgotten: %d held, want 1", n)
	}
	for i := range maxChecked - 1 {
		c.put(sum(i), long, keys, later, 0)
	}
	if _, ok := c.get(sum(5), keys, later); !ok {
		t.Fatal("a token checked a moment ago is not found")
	}
	if _, ok := c.get(sum(5), other, later); ok {
		t.Fatal("a token checked with other keys is taken")
	}
	if _, ok := c.get(sum(5), keys, later.Add(checkedFor)); ok {
		t.Fatalf("a token is taken %v after its check", checkedFor)
	}
	// Full of live tokens: all are forgotten, and checked again as they come.
	c.put(sum(-2), long, keys, later, 0)
	if n := len(c.m); n != 1 {
		t.Fatalf("full of live tokens: %d held after one more, want 1", n)
	}
	c.put(sum(-3), tok(later.Add(-time.Second)), keys, later, 0)
	if _, ok := c.get(sum(-3), keys, later); ok {
		t.Fatal("an expired token is taken")
	}
}
