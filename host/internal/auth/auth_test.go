package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/dispatch"
)

const (
	adminTok  = "admin-token-0001"
	viewerTok = "viewer.token~0002"
	hashedTok = "hashed+token/0003=="
)

// longTok is exactly MaxTokenLength characters, the longest accepted.
var longTok = strings.Repeat("L", config.MaxTokenLength)

// newStore builds a store from a real configuration, as the host does.
func newStore(t testing.TB) *Store {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
roles:
  admin: ["*"]
  viewer: ["booking.read"]
default_role: viewer
tokens:
  - {token: %s, label: ops-console, role: admin, scope: admin}
  - %s
  - {token_sha256: %s, role: viewer, scope: action, user_id: u-42}
  - %s
`, adminTok, viewerTok, strings.ToUpper(HashToken(hashedTok)), longTok)), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return New(cfg.Tokens)
}

func TestAuthenticate(t *testing.T) {
	s := newStore(t)
	// Each principal names its token by label, the configured one or
	// tokens-<index>, so limits and records tell tokens apart.
	admin := dispatch.Principal{Role: "admin", Scope: dispatch.ScopeAdmin, Token: "ops-console"}
	viewer := dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeRead, Token: "tokens-1"}
	bound := dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeAction, UserID: "u-42", Token: "tokens-2"}
	tests := []struct {
		name   string
		header string
		want   dispatch.Principal
		ok     bool
	}{
		{"first token", "Bearer " + adminTok, admin, true},
		{"plain string token gets defaults", "Bearer " + viewerTok, viewer, true},
		{"token_sha256 entry", "Bearer " + hashedTok, bound, true},
		{"longest token, last entry", "Bearer " + longTok, dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeRead, Token: "tokens-3"}, true},
		{"scheme lower case", "bearer " + adminTok, admin, true},
		{"scheme upper case", "BEARER " + adminTok, admin, true},
		{"several spaces", "Bearer    " + adminTok, admin, true},

		{"empty header", "", dispatch.Principal{}, false},
		{"scheme only", "Bearer", dispatch.Principal{}, false},
		{"scheme and space", "Bearer ", dispatch.Principal{}, false},
		{"scheme and spaces", "Bearer    ", dispatch.Principal{}, false},
		{"no space", "Bearer" + adminTok, dispatch.Principal{}, false},
		{"tab separator", "Bearer\t" + adminTok, dispatch.Principal{}, false},
		{"other scheme", "Basic " + adminTok, dispatch.Principal{}, false},
		{"prefix of scheme", "Bear " + adminTok, dispatch.Principal{}, false},
		{"leading space", " Bearer " + adminTok, dispatch.Principal{}, false},
		{"trailing space", "Bearer " + adminTok + " ", dispatch.Principal{}, false},
		{"two tokens", "Bearer " + adminTok + " " + viewerTok, dispatch.Principal{}, false},
		{"unknown token", "Bearer not-a-configured-token", dispatch.Principal{}, false},
		{"token differs in case", "Bearer " + strings.ToUpper(adminTok), dispatch.Principal{}, false},
		{"hash instead of token", "Bearer " + HashToken(hashedTok), dispatch.Principal{}, false},
		{"too short", "Bearer short", dispatch.Principal{}, false},
		{"too long", "Bearer " + longTok + "L", dispatch.Principal{}, false},
		{"bad character", "Bearer admin-token:0001", dispatch.Principal{}, false},
		{"padding in the middle", "Bearer admin=token0001", dispatch.Principal{}, false},
		{"only padding", "Bearer ==========", dispatch.Principal{}, false},
		{"quoted token", `Bearer "` + adminTok + `"`, dispatch.Principal{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := s.Authenticate(tt.header)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("Authenticate(%q) = %+v, %v; want %+v, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestAuthenticateEmptyStores(t *testing.T) {
	for name, s := range map[string]*Store{"zero": {}, "no tokens": New(nil)} {
		t.Run(name, func(t *testing.T) {
			if p, ok := s.Authenticate("Bearer " + adminTok); ok {
				t.Fatalf("authenticated %+v with no tokens configured", p)
			}
			if s.Len() != 0 {
				t.Fatalf("Len = %d", s.Len())
			}
		})
	}
}

// TestAuthenticateDoesNotAllocate guards the request path: a regression
// here costs every request.
func TestAuthenticateDoesNotAllocate(t *testing.T) {
	s := newStore(t)
	for _, h := range []string{"Bearer " + adminTok, "Bearer " + longTok, "Bearer unknown-token-xyz", "Basic abc", ""} {
		if n := testing.AllocsPerRun(100, func() { s.Authenticate(h) }); n != 0 {
			t.Errorf("Authenticate(%.20q...) allocates %v times per call", h, n)
		}
	}
}

// A token config.CheckToken refuses is refused even when its hash is in
// the store: the check comes before the lookup, so a malformed header never
// reaches it. (config.Load could not produce such entries; New can.)
func TestAuthenticateChecksTheTokenBeforeTheLookup(t *testing.T) {
	bad := []string{"short", "has:colon-in-it", strings.Repeat("L", config.MaxTokenLength+1), `"quoted-token"`}
	tokens := make([]config.Token, len(bad))
	for i, tok := range bad {
		if config.CheckToken(tok) == nil {
			t.Fatalf("config accepts %q; the test needs a refused token", tok)
		}
		tokens[i] = config.Token{SHA256: sha256.Sum256([]byte(tok)), Scope: dispatch.ScopeAdmin}
	}
	s := New(tokens)
	for _, tok := range bad {
		if p, ok := s.Authenticate("Bearer " + tok); ok {
			t.Errorf("Authenticate(%.20q...) = %+v; a token config refuses must not authenticate", tok, p)
		}
	}
}

// Two entries sharing a hash: the later one wins, as documented on New.
func TestAuthenticateDuplicateHashLaterWins(t *testing.T) {
	sum := sha256.Sum256([]byte(adminTok))
	s := New([]config.Token{
		{SHA256: sum, Role: "first", Scope: dispatch.ScopeRead},
		{SHA256: sha256.Sum256([]byte(viewerTok)), Role: "other", Scope: dispatch.ScopeRead},
		{SHA256: sum, Role: "second", Scope: dispatch.ScopeAction, UserID: "u-2"},
	})
	got, ok := s.Authenticate("Bearer " + adminTok)
	if want := (dispatch.Principal{Role: "second", Scope: dispatch.ScopeAction, UserID: "u-2"}); !ok || got != want {
		t.Fatalf("got %+v, %v; want the later entry %+v", got, ok, want)
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d, want 2 distinct tokens", s.Len())
	}
}

// Many tokens: every one is found, none is confused with another, and a
// lookup still allocates nothing.
func TestAuthenticateManyTokens(t *testing.T) {
	const n = 10000
	tokens := make([]config.Token, n)
	headers := make([]string, n)
	for i := range tokens {
		tok := fmt.Sprintf("cg_many-%06d", i)
		tokens[i] = config.Token{SHA256: sha256.Sum256([]byte(tok)), Role: fmt.Sprintf("r%d", i), Scope: dispatch.ScopeRead}
		headers[i] = "Bearer " + tok
	}
	s := New(tokens)
	if s.Len() != n {
		t.Fatalf("Len = %d, want %d", s.Len(), n)
	}
	for i, h := range headers {
		if p, ok := s.Authenticate(h); !ok || p.Role != fmt.Sprintf("r%d", i) {
			t.Fatalf("Authenticate(%q) = %+v, %v; want role r%d", h, p, ok, i)
		}
	}
	for _, h := range []string{headers[0], headers[n-1], "Bearer cg_many-unknown"} {
		if a := testing.AllocsPerRun(100, func() { s.Authenticate(h) }); a != 0 {
			t.Errorf("Authenticate(%q) with %d tokens allocates %v times per call", h, n, a)
		}
	}
}

var tokenShape = regexp.MustCompile(`^cg_[A-Za-z0-9_-]{43}$`)

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		tok, sum, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !tokenShape.MatchString(tok) {
			t.Fatalf("token %q does not look like cg_ + 43 base64url characters", tok)
		}
		if err := config.CheckToken(tok); err != nil {
			t.Fatalf("config refuses a generated token: %v", err)
		}
		if sum != HashToken(tok) {
			t.Fatalf("hash %s is not HashToken(token) %s", sum, HashToken(tok))
		}
		if seen[tok] {
			t.Fatalf("token %q generated twice", tok)
		}
		seen[tok] = true
	}
}

// TestNewTokenRoundTrip follows the operator's path: generate, put the hash
// in the config, authenticate with the token.
func TestNewTokenRoundTrip(t *testing.T) {
	tok, sum, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("tokens:\n  - {token_sha256: "+sum+", scope: action, user_id: alice}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := New(cfg.Tokens).Authenticate("Bearer " + tok)
	if want := (dispatch.Principal{Scope: dispatch.ScopeAction, UserID: "alice", Token: "tokens-0"}); !ok || p != want {
		t.Fatalf("got %+v, %v; want %+v", p, ok, want)
	}
}

func TestNewTokenRandomFailure(t *testing.T) {
	boom := errors.New("entropy exhausted")
	old := random
	random = iotest.ErrReader(boom)
	t.Cleanup(func() { random = old })
	tok, sum, err := NewToken()
	if !errors.Is(err, boom) || tok != "" || sum != "" {
		t.Fatalf("NewToken() = %q, %q, %v; want the read error and nothing else", tok, sum, err)
	}
}

func TestHashToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		if got := HashToken(tt.in); got != tt.want {
			t.Errorf("HashToken(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// BenchmarkAuthenticate measures a hit and a miss at 1, 256 and 10 000
// tokens: the cost must not grow with the number of configured tokens.
func BenchmarkAuthenticate(b *testing.B) {
	for _, n := range []int{1, 256, 10000} {
		tokens := make([]config.Token, n)
		for i := range tokens {
			tokens[i].SHA256 = [32]byte{byte(i), byte(i >> 8), 1}
			tokens[i].Scope = dispatch.ScopeRead
		}
		tok, sum, err := NewToken()
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := config.Parse([]byte("tokens: [{token_sha256: "+sum+"}]"), "")
		if err != nil {
			b.Fatal(err)
		}
		tokens[n-1] = cfg.Tokens[0] // the last entry: a loop that exits early would look fast here
		s := New(tokens)
		for _, c := range []struct {
			name, header string
			ok           bool
		}{{"hit", "Bearer " + tok, true}, {"miss", "Bearer cg_" + strings.Repeat("x", 43), false}} {
			b.Run(fmt.Sprintf("tokens=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, ok := s.Authenticate(c.header); ok != c.ok {
						b.Fatalf("ok = %v", ok)
					}
				}
			})
		}
	}
}
