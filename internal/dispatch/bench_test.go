package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// constProvider is the cheapest possible provider: it answers every call
// with the same owner and the same result, so a benchmark over it measures
// the gate and nothing else.
type constProvider struct {
	owner  string
	result json.RawMessage
}

func (c constProvider) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	if err := r.Owned(c.owner); err != nil {
		return nil, err
	}
	return c.result, nil
}

// BenchmarkInvoke measures the gate's own overhead per call: every step,
// argument validation and, for owner-guarded capabilities, the ownership
// check, around a provider that does no work.
func BenchmarkInvoke(b *testing.B) {
	reg := registry.New([]string{"bench"})
	for _, c := range []registry.Capability{
		{Name: "bench.ping", Kind: registry.Read, Pack: "bench", Permission: "bench.read", Plugin: "bench",
			InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`)},
		{Name: "bench.get", Kind: registry.Read, Pack: "bench", Permission: "bench.read", Plugin: "bench",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)},
		{Name: "bench.cancel", Kind: registry.Action, Pack: "bench", Permission: "bench.write", Plugin: "bench", OwnerGuarded: true,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"reason":{"type":"string","maxLength":200}},"required":["id"],"additionalProperties":false}`)},
	} {
		if err := reg.Add(c); err != nil {
			b.Fatal(err)
		}
	}
	d, err := dispatch.New(reg, dispatch.Policy{
		Packs: map[string]bool{"bench": true},
		Roles: map[string][]string{"member": {"bench.*"}},
	}, map[string]dispatch.Provider{"bench": constProvider{owner: "u-1", result: json.RawMessage(`{"ok":true}`)}})
	if err != nil {
		b.Fatal(err)
	}
	p := dispatch.Principal{Role: "member", Scope: dispatch.ScopeAction, UserID: "u-1"}
	ctx := context.Background()
	for _, bc := range []struct {
		name, capability string
		args             json.RawMessage
	}{
		{"read/no-args", "bench.ping", nil},
		{"read/one-arg", "bench.get", json.RawMessage(`{"id":"b-42"}`)},
		{"action/owner-guarded", "bench.cancel", json.RawMessage(`{"id":"b-42","reason":"plans changed"}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Invoke(ctx, p, bc.capability, bc.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
