package booking_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// bound is what a property's schema declares: a maxLength for a string, a
// minimum and maximum for a number.
type bound struct {
	MaxLength *int     `json:"maxLength"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
}

// inputSchemas is every capability's input schema, as the plugin describes
// it to the host (and the host to agents).
func inputSchemas(t *testing.T, c *sdktest.Client) map[string]json.RawMessage {
	t.Helper()
	d, err := c.Describe(context.Background())
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	out := map[string]json.RawMessage{}
	for _, cp := range d.GetCapabilities() {
		out[cp.GetName()] = cp.GetInputSchema()
	}
	return out
}

func properties(t *testing.T, schema json.RawMessage) map[string]bound {
	t.Helper()
	var s struct {
		Properties map[string]bound `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("input schema: %v", err)
	}
	return s.Properties
}

func TestInputBounds(t *testing.T) {
	c := start(t, demo)
	schemas := inputSchemas(t, c)
	length := func(n int) bound { return bound{MaxLength: &n} }
	between := func(lo, hi float64) bound { return bound{Minimum: &lo, Maximum: &hi} }
	want := map[string]map[string]bound{
		"booking.resources":    {},
		"booking.availability": {"resource_id": length(63), "date": length(10), "days": between(0, 14)},
		"booking.list":         {"status": length(16), "limit": between(0, 200)},
		"booking.get":          {"id": length(32)},
		"booking.create":       {"resource_id": length(63), "start": length(40)},
		"booking.cancel":       {"id": length(32)},
	}
	for name, props := range want {
		got := properties(t, schemas[name])
		if len(got) != len(props) {
			t.Errorf("%s has properties %v; want exactly %v", name, got, props)
		}
		for p, w := range props {
			g := got[p]
			if !eqInt(g.MaxLength, w.MaxLength) || !eqFloat(g.Minimum, w.Minimum) || !eqFloat(g.Maximum, w.Maximum) {
				t.Errorf("%s.%s declares %s; want %s", name, p, show(g), show(w))
			}
		}
	}

	// Every real value fits: the seeded resources' ids, a new booking's id,
	// today's date and the slot starts agents are handed.
	maxLen := func(capability, prop string) int { return *properties(t, schemas[capability])[prop].MaxLength }
	res := sdktest.Call[booking.ResourcesOut](t, c, "booking.resources", alice, nil)
	if len(res.Resources) < 20 {
		t.Fatalf("%d seeded resources", len(res.Resources))
	}
	for _, r := range res.Resources {
		if utf8.RuneCountInString(r.ID) > maxLen("booking.create", "resource_id") {
			t.Errorf("resource id %q is over the declared bound", r.ID)
		}
	}
	free := freeStarts(t, c, booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-09", Days: 14})
	if len(free) == 0 {
		t.Fatal("no free slots")
	}
	for _, s := range free {
		if len(s) > maxLen("booking.create", "start") {
			t.Errorf("slot start %q is over the declared bound", s)
		}
	}
	b := sdktest.Call[booking.Booking](t, c, "booking.create", alice, booking.CreateIn{ResourceID: "room-aurora", Start: free[0]})
	if len(b.ID) > maxLen("booking.get", "id") || len(b.ID) > maxLen("booking.cancel", "id") {
		t.Errorf("booking id %q is over the declared bound", b.ID)
	}
	if len("2030-01-09") != maxLen("booking.availability", "date") {
		t.Errorf("date bound %d is not the length of YYYY-MM-DD", maxLen("booking.availability", "date"))
	}
}

// TestOverLimitArgumentsRefused: the schema the plugin declares refuses
// every argument over its bounds, checked here with the validator the host
// uses (github.com/google/jsonschema-go), and the gate sdktest runs refuses
// the same arguments before the plugin sees them: an invalid-input error
// naming the property, short however long the argument.
func TestOverLimitArgumentsRefused(t *testing.T) {
	c := start(t, demo)
	schemas := inputSchemas(t, c)
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		capability string
		args       map[string]any
		refusal    string // what the schema's refusal names
	}{
		{"booking.availability", map[string]any{"resource_id": long(64)}, "/properties/resource_id: maxLength"},
		{"booking.availability", map[string]any{"resource_id": "room-aurora", "date": "2030-01-09T00:00:00Z"}, "/properties/date: maxLength"},
		{"booking.availability", map[string]any{"resource_id": "room-aurora", "days": 15}, "/properties/days: maximum"},
		{"booking.availability", map[string]any{"resource_id": "room-aurora", "days": -1}, "/properties/days: minimum"},
		{"booking.list", map[string]any{"status": long(17)}, "/properties/status: maxLength"},
		{"booking.list", map[string]any{"limit": 201}, "/properties/limit: maximum"},
		{"booking.list", map[string]any{"limit": -1}, "/properties/limit: minimum"},
		{"booking.get", map[string]any{"id": "bk_" + long(30)}, "/properties/id: maxLength"},
		{"booking.get", map[string]any{"id": long(100_000)}, "/properties/id: maxLength"},
		{"booking.create", map[string]any{"resource_id": long(64), "start": "2030-01-09T10:00:00Z"}, "/properties/resource_id: maxLength"},
		{"booking.create", map[string]any{"resource_id": "room-aurora", "start": "2030-01-09T10:00:00.000000000000000000000Z"}, "/properties/start: maxLength"},
		{"booking.cancel", map[string]any{"id": long(33)}, "/properties/id: maxLength"},
	}
	for _, tc := range cases {
		t.Run(tc.capability+" "+tc.refusal, func(t *testing.T) {
			err := validate(t, schemas[tc.capability], tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.refusal) {
				t.Errorf("schema validation: %v; want a refusal naming %q", err, tc.refusal)
			}
			property, _, _ := strings.Cut(strings.TrimPrefix(tc.refusal, "/properties/"), ":")
			_, err = c.Invoke(context.Background(), tc.capability, alice, tc.args)
			if !sdk.IsInvalidInput(err) || !strings.Contains(err.Error(), "invalid arguments for "+tc.capability) || !strings.Contains(err.Error(), property) {
				t.Fatalf("through the gate: %v; want its invalid-input error naming %s", err, property)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes echoes the argument: %.120q…", len(err.Error()), err.Error())
			}
		})
	}
	// The refused create booked nothing: alice holds her two seeded
	// bookings only.
	if hers := list(t, c, alice, nil); len(hers) != 2 {
		t.Errorf("alice has %d bookings after refused calls; want her 2", len(hers))
	}
	// At the bounds, the schema lets arguments through, and so does the
	// gate: the plugin answers (here, that the resource or booking does not
	// exist).
	for capability, args := range map[string]map[string]any{
		"booking.availability": {"resource_id": long(63), "date": "2030-01-09", "days": 14},
		"booking.list":         {"status": "cancelled", "limit": 200},
		"booking.create":       {"resource_id": long(63), "start": "2030-01-09T10:00:00.123456789+01:00"},
		"booking.cancel":       {"id": "bk_" + long(29)},
	} {
		if err := validate(t, schemas[capability], args); err != nil {
			t.Errorf("%s %v refused: %v", capability, args, err)
		}
		if _, err := c.Invoke(context.Background(), capability, alice, args); err != nil && strings.Contains(err.Error(), "invalid arguments") {
			t.Errorf("%s %v refused by the gate: %v", capability, args, err)
		}
	}
}

// validate checks args against schema as the host's registry does.
func validate(t *testing.T, schema json.RawMessage, args map[string]any) error {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("input schema: %v", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve input schema: %v", err)
	}
	// The host validates the decoded JSON: numbers are float64.
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return r.Validate(v)
}

func eqInt(a, b *int) bool       { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func eqFloat(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func show(b bound) string        { j, _ := json.Marshal(b); return string(j) }
