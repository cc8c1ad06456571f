package confirm_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/confirm"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/pgtest"
)

var key = []byte("0123456789abcdef0123456789abcdef")

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func sqliteStore(t *testing.T) *approvals.Store {
	t.Helper()
	s, err := approvals.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func question() dispatch.Question {
	return dispatch.Question{
		Principal:  dispatch.Principal{Token: "alice-phone", Role: "customer", Scope: dispatch.ScopeAction, UserID: "alice"},
		Capability: "booking.add_resource",
		Args:       json.RawMessage(`{"name":"Room 7","card":{"pin":"1234"}}`),
		Sensitive:  [][]string{{"card", "pin"}},
		Risk:       registry.RiskReviewRequired,
	}
}

func sealer(t *testing.T, used confirm.Used, c *clock) *confirm.Sealer {
	t.Helper()
	s, err := confirm.New(key, 5*time.Minute, used)
	if err != nil {
		t.Fatal(err)
	}
	return s.WithClock(c.now)
}

// TestQuestionAnsweredOnce: the state of a question opens for exactly its
// call, once; the question shows the call without its sensitive values.
func TestQuestionAnsweredOnce(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	s := sealer(t, sqliteStore(t), c)
	q := question()
	asked, err := s.Ask(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(asked.ID, "cf_") || !asked.ExpiresAt.Equal(c.now().Add(5*time.Minute)) || len(asked.State) > confirm.MaxStateBytes {
		t.Fatalf("asked %+v", asked)
	}
	if strings.Contains(asked.Message, "1234") || !strings.Contains(asked.Message, "Room 7") ||
		!strings.Contains(asked.Message, q.Capability) || !strings.Contains(asked.Message, "review_required") {
		t.Errorf("message %q: want the call with its sensitive value hidden", asked.Message)
	}
	id, err := s.Answered(ctx, asked.State, q)
	if err != nil || id != asked.ID {
		t.Fatalf("Answered = %q, %v; want %s", id, err, asked.ID)
	}
	if _, err := s.Answered(ctx, asked.State, q); !errors.Is(err, dispatch.ErrConfirmationState) || !strings.Contains(err.Error(), "answered before") {
		t.Fatalf("a replay: %v; want it refused as answered before", err)
	}
}

// TestStatesRefused: altered, truncated, foreign, expired, another
// principal's, another capability's or other arguments' states are
// refused, each saying why, and none of them uses the state up.
func TestStatesRefused(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	store := sqliteStore(t)
	s := sealer(t, store, c)
	q := question()
	asked, err := s.Ask(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(asked.State, ".")
	if len(parts) != 3 {
		t.Fatalf("state %q: want version.body.seal", asked.State)
	}
	// The body with another user, sealed by nobody.
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"alice"`, `"mallory"`, 1))) + "." + parts[2]
	otherKey, _ := confirm.New([]byte(strings.Repeat("k", 32)), time.Minute, store)
	foreign, _ := otherKey.WithClock(c.now).Ask(ctx, q)
	flip := []byte(asked.State)
	flip[len(flip)-3] ^= 1

	other := func(mut func(*dispatch.Question)) dispatch.Question {
		o := question()
		mut(&o)
		return o
	}
	for _, tc := range []struct {
		name, state string
		q           dispatch.Question
		why         string
	}{
		{"empty", "", q, "not one this server made"},
		{"garbage", "hello", q, "not one this server made"},
		{"altered body", forged, q, "not one this server made"},
		{"altered seal", string(flip), q, "not one this server made"},
		{"truncated", asked.State[:len(asked.State)-5], q, "not one this server made"},
		{"another version", "cf0" + asked.State[3:], q, "not one this server made"},
		{"another key", foreign.State, q, "not one this server made"},
		{"oversized", asked.State + strings.Repeat("A", confirm.MaxStateBytes), q, "not one this server made"},
		{"another token", asked.State, other(func(o *dispatch.Question) { o.Principal.Token = "bob-phone" }), "another token"},
		{"another user", asked.State, other(func(o *dispatch.Question) { o.Principal.UserID = "bob" }), "another token"},
		{"another capability", asked.State, other(func(o *dispatch.Question) { o.Capability = "booking.cancel" }), "another capability"},
		{"other arguments", asked.State, other(func(o *dispatch.Question) { o.Args = json.RawMessage(`{"name":"Room 8"}`) }), "other arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Answered(ctx, tc.state, tc.q)
			if !errors.Is(err, dispatch.ErrConfirmationState) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Answered: %v; want refused: %s", err, tc.why)
			}
		})
	}
	// None of those used it up: the genuine answer still counts, once.
	if _, err := s.Answered(ctx, asked.State, q); err != nil {
		t.Fatalf("the genuine answer after the refused ones: %v", err)
	}
	late, _ := s.Ask(ctx, q)
	c.advance(5 * time.Minute)
	if _, err := s.Answered(ctx, late.State, q); !errors.Is(err, dispatch.ErrConfirmationState) || !strings.Contains(err.Error(), "lapsed") {
		t.Fatalf("an expired state: %v; want refused as lapsed", err)
	}
}

// TestReplayOnAnotherReplica: two hosts sharing one PostgreSQL database
// and its key each open the other's states, and a state answered on one
// is refused on the other.
func TestReplayOnAnotherReplica(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.SchemaDSN(t)
	c := &clock{t: time.Now()}
	var hosts [2]*confirm.Sealer
	for i := range hosts {
		st, err := approvals.OpenPostgres(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		k, err := st.ConfirmKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, err := confirm.New(k, time.Minute, st)
		if err != nil {
			t.Fatal(err)
		}
		hosts[i] = s.WithClock(c.now)
	}
	q := question()
	asked, err := hosts[0].Ask(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hosts[1].Answered(ctx, asked.State, q); err != nil {
		t.Fatalf("the other replica refused a genuine state: %v", err)
	}
	if _, err := hosts[0].Answered(ctx, asked.State, q); !errors.Is(err, dispatch.ErrConfirmationState) {
		t.Fatalf("a replay on the first replica: %v; want refused", err)
	}
}

// TestStoreDownIsNotARefusal: a store that cannot record the answer is
// an error of the host, not the caller's bad state.
func TestStoreDownIsNotARefusal(t *testing.T) {
	ctx := context.Background()
	st := sqliteStore(t)
	s, err := confirm.New(key, time.Minute, st)
	if err != nil {
		t.Fatal(err)
	}
	asked, _ := s.Ask(ctx, question())
	st.Close()
	if _, err := s.Answered(ctx, asked.State, question()); err == nil || errors.Is(err, dispatch.ErrConfirmationState) {
		t.Fatalf("store closed: %v; want an error that is not a refusal", err)
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	st := sqliteStore(t)
	for _, tc := range []struct {
		key  []byte
		ttl  time.Duration
		used confirm.Used
	}{{key[:31], time.Minute, st}, {key, 0, st}, {key, time.Minute, nil}} {
		if _, err := confirm.New(tc.key, tc.ttl, tc.used); err == nil {
			t.Errorf("New(%d-byte key, %s, %v) succeeded", len(tc.key), tc.ttl, tc.used)
		}
	}
}

// FuzzAnswered: whatever a client sends back as a state, opening it
// never panics, and nothing but a state the sealer made is accepted.
func FuzzAnswered(f *testing.F) {
	st, err := approvals.OpenSQLite(context.Background(), filepath.Join(f.TempDir(), approvals.FileName), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	// A key of this process's own: fuzzing runs in worker processes, each
	// with its own sealer, and a state one process made must not open in
	// another as if it were its own.
	s, err := confirm.New([]byte(rand.Text()+rand.Text()), time.Minute, st)
	if err != nil {
		f.Fatal(err)
	}
	genuine, _ := s.Ask(context.Background(), question())
	f.Add(genuine.State)
	f.Add("cf1..")
	f.Add("cf1.e30.AAAA")
	f.Add(strings.Repeat(".", 100))
	f.Fuzz(func(t *testing.T, state string) {
		id, err := s.Answered(context.Background(), state, question())
		if state != genuine.State && err == nil {
			t.Fatalf("a state the sealer did not make was accepted as %s: %q", id, state)
		}
	})
}
