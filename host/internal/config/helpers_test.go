package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

// isolateEnv removes every CAPGATE_* variable for the test, so the
// environment the tests run in cannot change their outcome, then sets env.
func isolateEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, EnvPrefix) {
			t.Setenv(k, "") // registers the restore
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// problemLines returns the lines of a *Error, failing the test for any
// other kind of error.
func problemLines(t *testing.T, err error) []string {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error is %T (%v), want *Error", err, err)
	}
	lines := strings.Split(cerr.Error(), "\n")
	if len(lines) != len(cerr.Problems) {
		t.Fatalf("%d lines for %d problems:\n%v", len(lines), len(cerr.Problems), err)
	}
	return lines
}

// HashTokenForTest is the hex SHA-256 a token_sha256 entry holds.
func HashTokenForTest(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}
