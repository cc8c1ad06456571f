package registry_test

import (
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/internal/registry"
)

// bookingOut is booking.get's output schema as the SDK infers it, and
// bookingResult one result: what the gate checks on every such call.
const (
	bookingOut = `{"type":"object","required":["id","resource_id","resource_name","start","end","status","created_at"],` +
		`"properties":{"id":{"type":"string"},"resource_id":{"type":"string"},"resource_name":{"type":"string"},` +
		`"start":{"type":"string"},"end":{"type":"string"},"status":{"type":"string"},"created_at":{"type":"string"},` +
		`"cancelled_at":{"type":"string"}},"additionalProperties":false}`
	bookingResult = `{"id":"bk_0123456789ab","resource_id":"room-aurora","resource_name":"Aurora meeting room",` +
		`"start":"2030-01-08T09:00:00Z","end":"2030-01-08T10:00:00Z","status":"active","created_at":"2030-01-01T08:00:00Z"}`
)

// BenchmarkValidateResult is the gate's output-schema check of one
// booking.get result, next to the argument check of the same call.
func BenchmarkValidateResult(b *testing.B) {
	reg := registry.New([]string{"booking"})
	if err := reg.Add(registry.Capability{
		Name: "booking.get", Kind: registry.Read, Pack: "booking", Plugin: "booking",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","maxLength":32}},"required":["id"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(bookingOut),
	}); err != nil {
		b.Fatal(err)
	}
	e, _ := reg.Lookup("booking.get")
	b.Run("result", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := e.ValidateResult(json.RawMessage(bookingResult)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("arguments", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := e.ValidateArgs(json.RawMessage(`{"id":"bk_0123456789ab"}`)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
