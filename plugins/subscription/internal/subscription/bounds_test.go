package subscription_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/plugins/subscription/internal/subscription"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// bound is what a property's schema declares: a maxLength for a string.
type bound struct {
	MaxLength *int `json:"maxLength"`
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
	want := map[string]map[string]int{ // capability → string property → maxLength
		"subscription.plans":     {},
		"subscription.list":      {"status": 16},
		"subscription.get":       {"id": 32},
		"subscription.subscribe": {"plan_id": 63},
		"subscription.cancel":    {"id": 32},
	}
	for name, props := range want {
		got := properties(t, schemas[name])
		wantProps := len(props)
		if name == "subscription.cancel" {
			wantProps++ // at_period_end, a boolean: nothing to bound
		}
		if len(got) != wantProps {
			t.Errorf("%s has properties %v; want %v", name, got, props)
		}
		for p, w := range props {
			if g := got[p].MaxLength; g == nil || *g != w {
				t.Errorf("%s.%s maxLength %v; want %d", name, p, g, w)
			}
		}
	}

	// Every real value fits: the seeded plans' ids and a new
	// subscription's id.
	plans := sdktest.Call[subscription.PlansOut](t, c, "subscription.plans", alice, nil)
	if len(plans.Plans) < 6 {
		t.Fatalf("%d seeded plans", len(plans.Plans))
	}
	for _, p := range plans.Plans {
		if utf8.RuneCountInString(p.ID) > want["subscription.subscribe"]["plan_id"] {
			t.Errorf("plan id %q is over the declared bound", p.ID)
		}
	}
	sub := subscribe(t, c, carol, plans.Plans[0].ID)
	if len(sub.ID) > want["subscription.get"]["id"] || len(sub.ID) > want["subscription.cancel"]["id"] {
		t.Errorf("subscription id %q is over the declared bound", sub.ID)
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
		{"subscription.list", map[string]any{"status": long(17)}, "/properties/status: maxLength"},
		{"subscription.get", map[string]any{"id": "sub_" + long(29)}, "/properties/id: maxLength"},
		{"subscription.get", map[string]any{"id": long(100_000)}, "/properties/id: maxLength"},
		{"subscription.subscribe", map[string]any{"plan_id": long(64)}, "/properties/plan_id: maxLength"},
		{"subscription.cancel", map[string]any{"id": long(33), "at_period_end": false}, "/properties/id: maxLength"},
	}
	for _, tc := range cases {
		t.Run(tc.capability+" "+tc.refusal, func(t *testing.T) {
			err := validate(t, schemas[tc.capability], tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.refusal) {
				t.Errorf("schema validation: %v; want a refusal naming %q", err, tc.refusal)
			}
			property, _, _ := strings.Cut(strings.TrimPrefix(tc.refusal, "/properties/"), ":")
			raw, err := c.Invoke(context.Background(), tc.capability, alice, tc.args)
			if !sdk.IsInvalidInput(err) || !strings.Contains(err.Error(), "invalid arguments for "+tc.capability) || !strings.Contains(err.Error(), property) {
				t.Fatalf("through the gate: %s, %v; want its invalid-input error naming %s", raw, err, property)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes echoes the argument: %.120q…", len(err.Error()), err.Error())
			}
		})
	}
	// At the bounds, the schema lets arguments through.
	for capability, args := range map[string]map[string]any{
		"subscription.list":      {"status": "cancelled"},
		"subscription.get":       {"id": "sub_" + long(28)},
		"subscription.subscribe": {"plan_id": long(63)},
		"subscription.cancel":    {"id": "sub_" + long(28), "at_period_end": true},
	} {
		if err := validate(t, schemas[capability], args); err != nil {
			t.Errorf("%s %v refused: %v", capability, args, err)
		}
		if _, err := c.Invoke(context.Background(), capability, alice, args); err != nil && strings.Contains(err.Error(), "invalid arguments") {
			t.Errorf("%s %v refused by the gate: %v", capability, args, err)
		}
	}
	// The refused subscribe and cancel changed nothing: alice holds her
	// one seeded subscription, still renewing.
	if hers := list(t, c, alice, nil); len(hers) != 1 || hers[0].CancelAt != "" {
		t.Errorf("alice has %+v after refused calls; want her seeded subscription, unchanged", hers)
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
	return r.Validate(args)
}
