package config

import (
	"reflect"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
)

// TestInBandAndMaxPending: risk.in_band turns in-band confirmation off by
// capability and by pack (strings that parse as booleans too), and
// approvals.max_pending bounds a user's pending calls, 20 by default.
func TestInBandAndMaxPending(t *testing.T) {
	cfg := mustParse(t, "risk:\n  in_band:\n    capabilities: {booking.add_resource: false, booking.cancel: \"true\"}\n    packs: {subscription: false}\n"+
		"approvals: {max_pending: 3}\n", nil)
	want := dispatch.InBand{Capabilities: map[string]bool{"booking.add_resource": false, "booking.cancel": true}, Packs: map[string]bool{"subscription": false}}
	if !reflect.DeepEqual(cfg.InBand, want) {
		t.Fatalf("in_band %+v, want %+v", cfg.InBand, want)
	}
	if cfg.Approvals.MaxPending != 3 {
		t.Fatalf("max_pending %d, want 3", cfg.Approvals.MaxPending)
	}
	if cfg := mustParse(t, "", map[string]string{"CAPGATE_APPROVALS_MAX_PENDING": "7"}); cfg.Approvals.MaxPending != 7 || cfg.InBand.Capabilities != nil {
		t.Fatalf("from the environment: max_pending %d, in_band %+v", cfg.Approvals.MaxPending, cfg.InBand)
	}
	if cfg := mustParse(t, "", nil); cfg.Approvals.MaxPending != 20 {
		t.Fatalf("default max_pending %d, want 20", cfg.Approvals.MaxPending)
	}
}
