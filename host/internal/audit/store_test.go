package audit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/audit/audittest"
	"github.com/capgate/capgate/sdk/pgtest"
)

func TestContractSQLite(t *testing.T) {
	audittest.RunContract(t, func(t *testing.T) (string, string) { return "", t.TempDir() })
}

func TestContractPostgres(t *testing.T) {
	audittest.RunContract(t, func(t *testing.T) (string, string) { return pgtest.SchemaDSN(t), "" })
}

// TestOpen: the dsn picks the engine as it does for the host's other
// stores, and no error holds a password.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := audit.Open(context.Background(), "", dir)
	if err != nil {
		t.Fatalf("Open(SQLite in %s): %v", dir, err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, audit.FileName)); err != nil {
		t.Fatalf("SQLite file: %v", err)
	}
	aFile := filepath.Join(dir, audit.FileName)
	tests := []struct {
		name, dsn, dir string
		want           string
	}{
		{"other scheme", "mysql://u:s3cret@db/x", dir, "audit config: dsn must be a postgres:// or postgresql:// URL"},
		{"key=value", "host=db password=s3cret", dir, "audit config: dsn must be"},
		{"no data dir", "", "", "audit: the host gave no data directory"},
		{"data dir missing", "", filepath.Join(dir, "gone"), "audit: data directory"},
		{"data dir a file", "", aFile, "is not a directory"},
		{"nobody listening", "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2", "", "open audit database"},
		{"unparsable", "postgresql://u:s3cret@127.0.0.1:port/db", "", "audit config: dsn postgresql://(unparsable URL)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := audit.Open(context.Background(), tc.dsn, tc.dir)
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
