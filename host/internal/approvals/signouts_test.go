package approvals_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/sdk/pgtest"
)

func TestSignoutsSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), approvals.FileName)
	signoutContract(t, func(t *testing.T, c *clock) *approvals.Store {
		s, err := approvals.OpenSQLite(context.Background(), path, nil, approvals.WithClock(c.now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestSignoutsPostgres(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	signoutContract(t, func(t *testing.T, c *clock) *approvals.Store {
		s, err := approvals.OpenPostgres(context.Background(), dsn, nil, approvals.WithClock(c.now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// signoutContract: a session signed out on one store is ended on another
// sharing the database; recording it twice is no error; a sign-out past
// the session's expiry is forgotten at the next; bad ids are refused.
func signoutContract(t *testing.T, open opener) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	s, other := open(t, c), open(t, c)
	id := strings.Repeat("a", 64)
	if ended, err := other.SessionEnded(ctx, id); err != nil || ended {
		t.Fatalf("a session never signed out: ended %v, %v", ended, err)
	}
	for range 2 {
		if err := s.EndSession(ctx, id, c.now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if ended, err := other.SessionEnded(ctx, id); err != nil || !ended {
		t.Fatalf("a session signed out on the other store: ended %v, %v", ended, err)
	}
	c.advance(time.Hour)
	if err := other.EndSession(ctx, "b", c.now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SignoutsLeft(ctx); err != nil || n != 1 {
		t.Fatalf("after the first session's expiry: %d sign-outs kept (%v); want only the second", n, err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 65), "\xff"} {
		if err := s.EndSession(ctx, bad, c.now()); !errors.Is(err, approvals.ErrInvalid) {
			t.Errorf("EndSession(%q): %v; want ErrInvalid", bad, err)
		}
		if _, err := s.SessionEnded(ctx, bad); !errors.Is(err, approvals.ErrInvalid) {
			t.Errorf("SessionEnded(%q): %v; want ErrInvalid", bad, err)
		}
	}
}
