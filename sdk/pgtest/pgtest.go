// Package pgtest gives a test its own empty PostgreSQL schema, for the
// PostgreSQL stores of plugins and their contract tests.
//
// The server comes from env CAPGATE_TEST_POSTGRES_DSN, by default DefaultDSN
// (the PostgreSQL that CI starts). When it cannot be reached the test is
// skipped with a message saying so — unless env CI is set: CI must provide
// PostgreSQL, so there the test fails instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capgate/capgate/sdk/sqlstore"
)

// EnvDSN names the environment variable holding the test server's DSN.
const EnvDSN = "CAPGATE_TEST_POSTGRES_DSN"

// DefaultDSN is the server used when EnvDSN is unset.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// ServerDSN returns the test server's DSN after checking it answers; see the
// package doc for what happens when it does not.
func ServerDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		dsn = DefaultDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
	}
	if err != nil {
		msg := fmt.Sprintf("no PostgreSQL at %s (set %s to another server): %v", Redact(dsn), EnvDSN, err)
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI must provide it (.ci/run starts it)", msg)
		}
		t.Skip(msg)
	}
	return dsn
}

// SchemaDSN creates a schema of a fresh random name on the test server and
// returns a DSN whose connections use it (search_path), so tests in
// parallel never see each other's tables. The schema and everything in it
// is dropped at the test's cleanup.
func SchemaDSN(t testing.TB) string {
	t.Helper()
	base := ServerDSN(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random schema name: %v", err)
	}
	schema := "test_" + hex.EncodeToString(b[:])
	exec(t, base, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { exec(t, base, "DROP SCHEMA "+schema+" CASCADE") })
	dsn, err := WithSearchPath(base, schema)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return dsn
}

// WithSearchPath returns dsn (URL or key=value form) with search_path set
// to schema.
func WithSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvDSN, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " search_path=" + schema, nil
}

func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", Redact(dsn), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Redact returns dsn with any password replaced, for messages; see
// sqlstore.Redact.
func Redact(dsn string) string { return sqlstore.Redact(dsn) }
