package registry

import (
	"encoding/json"
	"testing"
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
// booking.get result (decoding included), next to the argument check of
// the same call.
func BenchmarkValidateResult(b *testing.B) {
	reg := New([]string{"booking"})
	if err := reg.Add(Capability{
		Name: "booking.get", Kind: Read, Pack: "booking", Plugin: "booking",
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

// BenchmarkFastCheck compares, on one decoded booking.get result, the fast
// walk with the general validator it spares valid values.
func BenchmarkFastCheck(b *testing.B) {
	s, full := resolve(b, bookingOut)
	fast, err := compileFast(s, "#")
	if err != nil {
		b.Fatal(err)
	}
	v := decode(b, bookingResult)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !fast.accepts(v) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("validator", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := full.Validate(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
