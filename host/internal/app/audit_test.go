package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/sdk/pgtest"
)

// TestAuditTrail: through the assembled host, each call leaves one record
// in the host's database with the fields the trail promises, the value of
// a sensitive field never among them, on SQLite and on PostgreSQL.
func TestAuditTrail(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dataDir, dsn := t.TempDir(), ""
			if engine == "postgres" {
				dsn = pgtest.SchemaDSN(t)
			}
			cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
database: {dsn: %q}
tokens:
  - {token: audit-token-1, label: greeter, role: r, scope: read, user_id: u1}
  - {token: audit-token-2, role: nobody, scope: read}
roles: {r: [hello.greet, booking.read], nobody: []}
packs: {hello: true, booking: true}
plugins:
  - {name: hello, path: %s}
  - {name: booking, path: %s, config: {seed: demo}}
`, dataDir, dsn, helloBin, bookingBin)), "")
			if err != nil {
				t.Fatal(err)
			}
			addr, stop := serveSearch(t, cfg, nil)
			const secret = "correct-horse-battery"
			if _, e := rpc(t, addr, "audit-token-1", "tools/call", map[string]any{"name": "hello.greet", "arguments": map[string]any{"name": "ann", "passphrase": secret}}); e != nil {
				t.Fatal(e)
			}
			rpc(t, addr, "audit-token-2", "tools/call", map[string]any{"name": "hello.greet", "arguments": map[string]any{"name": "bo"}})
			rpc(t, addr, "audit-token-1", "tools/call", map[string]any{"name": "booking.get", "arguments": map[string]any{"id": "bk_aaaaaaaaaaaa"}})
			stop() // drains the writer

			store, err := audit.Open(context.Background(), dsn, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			page, err := store.Query(context.Background(), audit.Filter{Order: audit.OldestFirst})
			if err != nil {
				t.Fatal(err)
			}
			var calls []audit.Record
			for _, r := range page.Records {
				if !strings.HasPrefix(r.Capability, "capgate.") {
					calls = append(calls, r)
				}
			}
			if len(calls) != 3 {
				t.Fatalf("%d call records, want 3: %+v", len(calls), page.Records)
			}
			greet, refused, missing := calls[0], calls[1], calls[2]
			if greet.TokenLabel != "greeter" || greet.UserID != "u1" || greet.Role != "r" || greet.Scope != "read" || greet.Plugin != "hello" ||
				greet.Decision != audit.Admitted || greet.Outcome != audit.OutcomeOK || greet.Protocol != "mcp" ||
				greet.ProtocolVersion != "2025-11-25" || greet.RequestID != "1" || greet.Latency <= 0 || time.Since(greet.Time) > time.Minute {
				t.Errorf("the admitted call: %+v", greet)
			}
			if strings.Contains(string(greet.Args), secret) || !strings.Contains(string(greet.Args), `"[redacted]"`) || !strings.Contains(string(greet.Args), `"ann"`) {
				t.Errorf("args kept %s; want the name and the passphrase redacted", greet.Args)
			}
			if refused.TokenLabel != "tokens-1" || refused.Decision != audit.Refused || refused.Step != "permission" || refused.Reason == "" || refused.Outcome != "" {
				t.Errorf("the refused call: %+v", refused)
			}
			if missing.Capability != "booking.get" || missing.Outcome != audit.OutcomeToolError || missing.ErrorCode != "not_found" ||
				string(missing.Args) != `{"id":"bk_aaaaaaaaaaaa"}` {
				t.Errorf("the call that found nothing: %+v", missing)
			}
			for _, r := range page.Records {
				if strings.Contains(string(r.Args)+r.Reason, secret) {
					t.Errorf("a record holds the secret: %+v", r)
				}
			}
		})
	}
}
