package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/idempotency"
	"github.com/capgate/capgate/internal/idempotency/idempotencytest"
	"github.com/capgate/capgate/sdk/pgtest"
)

func TestContractSQLite(t *testing.T) {
	idempotencytest.RunContract(t, func(t *testing.T) (string, string) { return "", t.TempDir() })
}

func TestContractPostgres(t *testing.T) {
	idempotencytest.RunContract(t, func(t *testing.T) (string, string) { return pgtest.SchemaDSN(t), "" })
}

// TestOpen: the dsn picks the engine as it does for plugins, and no error
// holds a password.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := idempotency.Open(context.Background(), "", dir)
	if err != nil {
		t.Fatalf("Open(SQLite in %s): %v", dir, err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, idempotency.FileName)); err != nil {
		t.Fatalf("SQLite file: %v", err)
	}
	aFile := filepath.Join(dir, idempotency.FileName)
	tests := []struct {
		name, dsn, dir string
		want           string
	}{
		{"other scheme", "mysql://u:s3cret@db/x", dir, "idempotency config: dsn must be a postgres:// or postgresql:// URL"},
		{"key=value", "host=db password=s3cret", dir, "idempotency config: dsn must be"},
		{"no data dir", "", "", "idempotency: the host gave no data directory"},
		{"data dir missing", "", filepath.Join(dir, "gone"), "idempotency: data directory"},
		{"data dir a file", "", aFile, "is not a directory"},
		{"nobody listening", "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2", "", "open idempotency database"},
		{"unparsable", "postgresql://u:s3cret@127.0.0.1:port/db", "", "idempotency config: dsn postgresql://(unparsable URL)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := idempotency.Open(context.Background(), tc.dsn, tc.dir)
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open error = %v; want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("Open error = %v; it leaks the password", err)
			}
		})
	}
}

func TestFingerprintOf(t *testing.T) {
	fp := func(capability, args string) idempotency.Fingerprint {
		t.Helper()
		f, err := idempotency.FingerprintOf(capability, json.RawMessage(args))
		if err != nil {
			t.Fatalf("FingerprintOf(%s, %s): %v", capability, args, err)
		}
		return f
	}
	base := fp("booking.create", `{"resource_id":"room-a","start":"2030-01-07T10:00:00Z","n":[1,{"b":2,"a":1}]}`)
	same := []string{
		`{"start":"2030-01-07T10:00:00Z","resource_id":"room-a","n":[1,{"a":1,"b":2}]}`,
		" {\n\t\"resource_id\" : \"room-a\", \"start\":\"2030-01-07T10:00:00Z\" ,\"n\":[ 1 , {\"b\":2,\"a\":1} ] }\n",
		`{"resource_id":"room\u002da","start":"2030-01-07T10:00:00Z","n":[1,{"b":2,"a":1}]}`,
	}
	for _, args := range same {
		if got := fp("booking.create", args); got != base {
			t.Errorf("FingerprintOf(%s) differs from the same arguments written otherwise", args)
		}
	}
	differ := []struct{ capability, args string }{
		{"booking.cancel", `{"resource_id":"room-a","start":"2030-01-07T10:00:00Z","n":[1,{"b":2,"a":1}]}`},
		{"booking.create", `{"resource_id":"room-b","start":"2030-01-07T10:00:00Z","n":[1,{"b":2,"a":1}]}`},
		{"booking.create", `{"resource_id":"room-a","start":"2030-01-07T10:00:00Z","n":[{"b":2,"a":1},1]}`},
		{"booking.create", `{"resource_id":"room-a","start":"2030-01-07T10:00:00Z","n":[1.0,{"b":2,"a":1}]}`},
		{"booking.create", `{"resource_id":"room-a","start":"2030-01-07T10:00:00Z"}`},
	}
	for _, d := range differ {
		if fp(d.capability, d.args) == base {
			t.Errorf("FingerprintOf(%s, %s) equals a different request's", d.capability, d.args)
		}
	}
	// Absent arguments are the empty object, as the gate passes them on.
	empty := fp("booking.list", `{}`)
	for _, args := range []string{``, `null`, "  ", ` { } `} {
		if fp("booking.list", args) != empty {
			t.Errorf("FingerprintOf(booking.list, %q) differs from {}", args)
		}
	}
	// The capability and arguments cannot trade bytes.
	if fp("a", `"bc"`) == fp(`a"`, `"c"`) {
		t.Error("FingerprintOf lets bytes move between capability and arguments")
	}
	// Integers beyond float64 precision stay distinct.
	if fp("x", `{"n":9007199254740993}`) == fp("x", `{"n":9007199254740992}`) {
		t.Error("FingerprintOf rounds large integers")
	}
	for _, bad := range []string{`{"a":`, `{"a":1} {"b":2}`, `{"a":1}x`, `nul`} {
		if _, err := idempotency.FingerprintOf("x", json.RawMessage(bad)); !errors.Is(err, idempotency.ErrInvalid) {
			t.Errorf("FingerprintOf(%q) error = %v; want ErrInvalid", bad, err)
		}
	}
}

func TestValidateKey(t *testing.T) {
	for _, k := range []string{"a", "550e8400-e29b-41d4-a716-446655440000", "01HZX3J2Q9V0Y8K7M6N5P4R3S2", "!~" + strings.Repeat("z", 253)} {
		if err := idempotency.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v; want nil", k, err)
		}
	}
	tests := []struct{ key, want string }{
		{"", "must be 1 to 255 characters, got 0 bytes"},
		{strings.Repeat("k", 256), "must be 1 to 255 characters, got 256 bytes"},
		{"two words", "byte 4 is 0x20"},
		{"tab\t", "byte 4 is 0x09"},
		{"é", "byte 1 is 0xc3"},
	}
	for _, tc := range tests {
		err := idempotency.ValidateKey(tc.key)
		if !errors.Is(err, idempotency.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidateKey(%q) = %v; want ErrInvalid saying %q", tc.key, err, tc.want)
		}
	}
}
