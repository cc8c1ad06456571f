package eventspack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
	"github.com/capgate/capgate/host/internal/eventspack"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

var (
	owner    = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "alice"}
	reader   = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead, UserID: "alice"}
	stranger = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "bob"}
	admin    = dispatch.Principal{Role: "admin", Scope: dispatch.ScopeAdmin, UserID: "ops"}
	adminNoU = dispatch.Principal{Role: "admin", Scope: dispatch.ScopeAdmin}
	unbound  = dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead}
	unboundA = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction}

	catalogue = events.Event{Type: "catalogue.upsert", Entity: "booking.resource", ID: "room-aurora"}
	personal  = events.Event{Type: "booking.created", Entity: "booking", ID: "bk_1", UserID: "alice"}
)

func TestVisible(t *testing.T) {
	tests := []struct {
		name string
		p    dispatch.Principal
		ev   events.Event
		want bool
	}{
		{"owner sees catalogue", owner, catalogue, true},
		{"owner sees own", owner, personal, true},
		{"owner's read token sees own", reader, personal, true},
		{"stranger sees catalogue", stranger, catalogue, true},
		{"stranger does not see another's", stranger, personal, false},
		{"admin sees catalogue", admin, catalogue, true},
		{"admin sees another's", admin, personal, true},
		{"unbound admin sees another's", adminNoU, personal, true},
		{"unbound reader sees catalogue", unbound, catalogue, true},
		{"unbound reader does not see personal", unbound, personal, false},
		{"unbound action token does not see personal", unboundA, personal, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := eventspack.Visible(tc.p, tc.ev); got != tc.want {
				t.Errorf("Visible = %v, want %v", got, tc.want)
			}
		})
	}
}

func newBus(t *testing.T, size int) *events.NATS {
	t.Helper()
	return eventstest.Embedded(t, size)
}

func publish(t *testing.T, bus events.Bus, evs ...events.Event) {
	t.Helper()
	for _, ev := range evs {
		if _, err := bus.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
}

func ev(typ, id, user string) events.Event {
	entity := "booking"
	if user == "" {
		entity = "booking.resource"
	}
	return events.Event{Type: typ, Entity: entity, ID: id, UserID: user, Data: json.RawMessage(`{"k":"` + id + `"}`)}
}

func ids(out eventspack.PollOut) string {
	var s []string
	for _, e := range out.Events {
		s = append(s, fmt.Sprintf("%d:%s", e.Cursor, e.ID))
	}
	return strings.Join(s, " ")
}

func poll(t *testing.T, p *eventspack.Provider, pr dispatch.Principal, args string) (eventspack.PollOut, error) {
	t.Helper()
	raw, err := p.Invoke(context.Background(), dispatch.Request{Principal: pr, Capability: eventspack.Capability, Args: json.RawMessage(args)})
	if err != nil {
		return eventspack.PollOut{}, err
	}
	var out eventspack.PollOut
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return out, nil
}

func TestPollFiltersAndPages(t *testing.T) {
	bus := newBus(t, 100)
	publish(t, bus,
		ev("catalogue.upsert", "r1", ""),       // 1
		ev("booking.created", "a1", "alice"),   // 2
		ev("booking.created", "b1", "bob"),     // 3
		ev("booking.created", "b2", "bob"),     // 4
		ev("booking.cancelled", "a1", "alice"), // 5
		ev("catalogue.upsert", "r2", ""),       // 6
	)
	p, err := eventspack.New(bus, 2)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pr   dispatch.Principal
		args string
		want string
		next uint64
	}{
		{"owner, first page", owner, `{}`, "1:r1 2:a1", 2},
		{"owner reads past bob's events", owner, `{"after":2}`, "5:a1 6:r2", 6},
		{"owner at the end", owner, `{"after":6}`, "", 6},
		{"stranger", stranger, `{"after":1,"limit":2}`, "3:b1 4:b2", 4},
		{"unbound sees catalogue only", unbound, `{"limit":2}`, "1:r1 6:r2", 6},
		{"unbound, nothing visible after", unbound, `{"after":1,"limit":1}`, "6:r2", 6},
		{"admin sees all", admin, `{"after":2}`, "3:b1 4:b2", 4},
		{"null arguments", owner, `null`, "1:r1 2:a1", 2},
		{"limit 1", owner, `{"limit":1}`, "1:r1", 1},
		{"after beyond the newest", owner, `{"after":99}`, "", 99},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := poll(t, p, tc.pr, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(out); got != tc.want || out.Next != tc.next {
				t.Errorf("got [%s] next %d, want [%s] next %d", got, out.Next, tc.want, tc.next)
			}
			if out.Events == nil {
				t.Error("events is null, want []")
			}
		})
	}
	out, _ := poll(t, p, owner, `{"limit":1,"after":1}`)
	e := out.Events[0]
	if e.Type != "booking.created" || e.Entity != "booking" || e.UserID != "alice" || fmt.Sprint(e.Data) != "map[k:a1]" {
		t.Errorf("event = %+v", e)
	}
	if at, err := time.Parse(time.RFC3339Nano, e.At); err != nil || at.IsZero() {
		t.Errorf("at = %q: %v", e.At, err)
	}
}

func TestPollCursorTooOld(t *testing.T) {
	bus := newBus(t, 3)
	for i := range 10 {
		publish(t, bus, ev("catalogue.upsert", fmt.Sprint("r", i+1), ""))
	}
	p, _ := eventspack.New(bus, 20)
	_, err := poll(t, p, owner, `{"after":2}`)
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.InvalidInput ||
		!strings.Contains(te.Message, "cursor 2 is older than the events still kept: the oldest available cursor is 8") ||
		!strings.Contains(te.Message, "after: 7") {
		t.Fatalf("err = %v; want an InvalidInput tool error naming the oldest cursor 8", err)
	}
	// The advice works, and a poll without a cursor starts at the oldest.
	for _, args := range []string{`{"after":7}`, `{}`} {
		out, err := poll(t, p, owner, args)
		if err != nil || ids(out) != "8:r8 9:r9 10:r10" || out.Next != 10 {
			t.Errorf("%s: [%s] next %d, %v", args, ids(out), out.Next, err)
		}
	}
}

func TestPollErrors(t *testing.T) {
	bus := newBus(t, 10)
	p, _ := eventspack.New(bus, 5)
	for _, tc := range []struct{ args, want string }{
		{`{"limit":6}`, "limit must be between 1 and 5, got 6"},
		{`{"limit":-1}`, "limit must be between 1 and 5, got -1"},
		{`{"after":"x"}`, "arguments do not fit the input schema"},
		{`[1]`, "arguments do not fit the input schema"},
	} {
		_, err := poll(t, p, owner, tc.args)
		var te *dispatch.ToolError
		if !errors.As(err, &te) || te.Code != dispatch.InvalidInput || !strings.Contains(te.Message, tc.want) {
			t.Errorf("%s: err = %v, want InvalidInput %q", tc.args, err, tc.want)
		}
	}
	if _, err := p.Invoke(context.Background(), dispatch.Request{Principal: owner, Capability: "events.other", Args: nil}); !errors.Is(err, dispatch.ErrUnknownCapability) {
		t.Errorf("unknown capability: %v", err)
	}
	bus.Close()
	if _, err := poll(t, p, owner, `{}`); !errors.Is(err, events.ErrClosed) {
		t.Errorf("closed bus: %v", err)
	}
	if _, err := eventspack.New(nil, 5); err == nil {
		t.Error("New(nil bus): no error")
	}
	if _, err := eventspack.New(bus, 0); err == nil {
		t.Error("New(max 0): no error")
	}
}

// TestCapabilityRegisters: the inferred schemas compile in the registry and
// bound limit by max_results there too.
func TestCapabilityRegisters(t *testing.T) {
	p, _ := eventspack.New(newBus(t, 10), 7)
	c, err := p.Capability()
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New([]string{"events"})
	if err := reg.Add(c); err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup(eventspack.Capability)
	if e.Pack != "events" || e.Permission != "events.read" || e.Kind != registry.Read || e.Plugin != eventspack.ProviderName || e.OwnerGuarded {
		t.Errorf("capability %+v", e.Capability)
	}
	for args, ok := range map[string]bool{`{}`: true, `{"after":3,"limit":7}`: true, `{"limit":8}`: false, `{"limit":0}`: false, `{"after":-1}`: false, `{"x":1}`: false} {
		if err := e.ValidateArgs(json.RawMessage(args)); (err == nil) != ok {
			t.Errorf("ValidateArgs(%s) = %v, want ok=%v", args, err, ok)
		}
	}
}
