package sqlite_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/plugins/subscription/internal/store/sqlite"
	"github.com/capgate/capgate/plugins/subscription/internal/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.RunContract(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "subscription.db"), nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestOpenSetsPragmas(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "subscription.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "10000"},
	}
	for _, tc := range tests {
		t.Run(tc.pragma, func(t *testing.T) {
			var got string
			if err := s.DB().QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil {
				t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
			}
			if got != tc.want {
				t.Fatalf("PRAGMA %s = %q; want %q", tc.pragma, got, tc.want)
			}
		})
	}
}

// TestReopenAppliesNothing: the first open migrates and logs it, a second
// open of the same file finds it current and changes nothing.
func TestReopenAppliesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscription.db")
	open := func() string {
		var buf bytes.Buffer
		s, err := sqlite.Open(context.Background(), path, slog.New(slog.NewTextHandler(&buf, nil)))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if first := open(); !strings.Contains(first, "0001_plans_subscriptions.sql") {
		t.Fatalf("first open logged %q; want the applied migration", first)
	}
	if second := open(); strings.Contains(second, "applied migration") {
		t.Fatalf("second open logged %q; want nothing applied", second)
	}
}

func TestOpenErrors(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not sqlite ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"empty path", "", "empty path"},
		{"query in path", filepath.Join(t.TempDir(), "x.db?mode=ro"), "must not contain '?'"},
		{"not a database", garbage, "garbage.db"},
		{"missing directory", filepath.Join(t.TempDir(), "gone", "x.db"), "x.db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.Open(context.Background(), tc.path, nil)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded; want an error", tc.path)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) error = %v; want it to contain %q", tc.path, err, tc.want)
			}
		})
	}
}
