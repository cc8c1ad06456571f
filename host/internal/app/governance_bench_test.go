package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
	"github.com/capgate/capgate/internal/registry"
)

type echoProvider struct{ result json.RawMessage }

func (e echoProvider) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return e.result, nil
}

// BenchmarkGovernance is what the audit trail and rate limits add to a
// call through the gate, on both cores at once so that the writer's work
// behind the calls competes with them as it does under load: the same
// call plain, and audited to SQLite and counted against an in-memory
// limit, as the governed bench row runs it. The provider does no work, so
// the difference is governance alone.
func BenchmarkGovernance(b *testing.B) {
	reg := registry.New([]string{"bench"})
	if err := reg.Add(registry.Capability{Name: "bench.greet", Kind: registry.Read, Pack: "bench", Permission: "bench.read", Plugin: "bench",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"passphrase":{"type":"string","x-capgate-sensitive":true}},"additionalProperties":false}`)}); err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"name":"bench"}`)
	p := dispatch.Principal{Token: "tokens-0", Role: "member", Scope: dispatch.ScopeAction, UserID: "u-1"}
	for _, governed := range []bool{false, true} {
		name := "plain"
		if governed {
			name = "governed"
		}
		b.Run(name, func(b *testing.B) {
			policy := dispatch.Policy{Packs: map[string]bool{"bench": true}, Roles: map[string][]string{"member": {"bench.*"}}}
			if governed {
				policy.Limits = dispatch.Limits{Default: dispatch.Rate{Count: 1000000, Per: time.Second}}
			}
			d, err := dispatch.New(reg, policy, map[string]dispatch.Provider{"bench": echoProvider{json.RawMessage(`{"greeting":"hello, bench"}`)}})
			if err != nil {
				b.Fatal(err)
			}
			var w *audit.Writer
			if governed {
				store, err := audit.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), audit.FileName))
				if err != nil {
					b.Fatal(err)
				}
				defer store.Close()
				// Room for every record of the run, so none is dropped: the
				// writer's work is part of the figure, Close included.
				if w, err = audit.NewWriter(store, audit.WriterConfig{QueueSize: 1 << 21}); err != nil {
					b.Fatal(err)
				}
				d.UseLimiter(ratelimit.NewMemory())
				d.UseAuditor(&auditor{w: w, log: slog.New(slog.DiscardHandler)}, true)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := d.Invoke(ctx, p, "bench.greet", args); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if w != nil {
				if err := w.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				if st := w.Stats(); st.Dropped > 0 {
					b.Fatalf("the writer dropped %d records: the figure would leave their cost out", st.Dropped)
				}
			}
		})
	}
}
