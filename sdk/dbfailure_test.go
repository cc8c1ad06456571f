package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/capgate/capgate/sdk"
)

// TestDatabaseUnreachable: a connection failure is an Unavailable error
// naming the database when nothing can have changed, and stays what it
// was (an internal error) when a write may have been committed or the
// database itself answered.
func TestDatabaseUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, refused := pgx.Connect(ctx, "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=5")
	if refused == nil {
		t.Fatal("connecting to port 1 succeeded")
	}
	refused = fmt.Errorf("get resource: %w", refused)
	broken := fmt.Errorf("insert booking: %w", io.ErrUnexpectedEOF) // the connection died mid-call
	answered := fmt.Errorf("insert booking: %w", &pgconn.PgError{Code: "23505", Message: "duplicate key"})
	shutdown := fmt.Errorf("list: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})

	for _, c := range []struct {
		name        string
		err         error
		wrote       bool
		unavailable bool
	}{
		{"refused read", refused, false, true},
		{"refused write: nothing was sent", refused, true, true},
		{"broken read", broken, false, true},
		{"broken write: may be committed", broken, true, false},
		{"shut down under a read", shutdown, false, true},
		{"shut down under a write", shutdown, true, false},
		{"the database answered", answered, false, false},
		{"the caller gave up", fmt.Errorf("list: %w", context.Canceled), false, false},
		{"no error", nil, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := sdk.DatabaseUnreachable("the booking database", c.err, c.wrote)
			if !c.unavailable {
				if got != c.err {
					t.Fatalf("got %v; want the error unchanged, %v", got, c.err)
				}
				return
			}
			var e *sdk.Error
			if !errors.As(got, &e) || e.Code != sdk.CodeUnavailable {
				t.Fatalf("got %v; want an unavailable tool error", got)
			}
			if !strings.Contains(e.Message, "the booking database is unreachable") || !strings.Contains(e.Message, "nothing was changed") {
				t.Errorf("message %q does not name the database and say nothing changed", e.Message)
			}
			for _, secret := range []string{"127.0.0.1", "s3cret", "user=", ":1"} {
				if strings.Contains(e.Message, secret) {
					t.Errorf("message %q holds %q", e.Message, secret)
				}
			}
			if !errors.Is(got, io.ErrUnexpectedEOF) && c.err == broken {
				t.Error("the cause is not in the chain")
			}
		})
	}
}
