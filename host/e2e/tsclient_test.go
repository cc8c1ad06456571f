package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// tsCall is how js/client.mjs reports one tools/call.
type tsCall struct {
	IsError bool            `json:"isError"`
	Data    json.RawMessage `json:"data"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// TestTypeScriptClient drives the host with the official TypeScript SDK
// client (js/client.mjs) as alice and checks what it saw: her tools, her
// bookings, a cancel of her own booking that really happened, the
// ownership refusal on bob's booking, which stays booked, and the catalogue
// (resource templates, every resources/list page, a resources/read and
// platform.search), the same as the Go SDK client sees it.
func TestTypeScriptClient(t *testing.T) {
	needE2E(t)
	nodeBin(t)
	h := startHost(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, err := runNode(t, ctx, "client.mjs", "--url", h.url(), "--token", tokenAlice, "--other-token", tokenBob)
	if err != nil {
		t.Fatalf("client.mjs: %v; stdout:\n%s", err, stdout)
	}
	t.Logf("client.mjs:\n%s", stdout)
	var out struct {
		ServerVersion   *struct{ Name string } `json:"serverVersion"`
		ProtocolVersion string                 `json:"protocolVersion"`
		Tools           []string               `json:"tools"`
		List            tsCall                 `json:"list"`
		OwnBookingID    string                 `json:"ownBookingId"`
		CancelOwn       *tsCall                `json:"cancelOwn"`
		OtherBookingID  string                 `json:"otherBookingId"`
		CancelOther     *tsCall                `json:"cancelOther"`
		tsCatalogue
		Checks map[string]bool `json:"checks"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("client.mjs output is not the expected JSON: %v", err)
	}

	if len(out.Checks) != 10 {
		t.Errorf("client.mjs reported checks %v, want its 10", out.Checks)
	}
	for name, ok := range out.Checks {
		if !ok {
			t.Errorf("client.mjs check %s failed", name)
		}
	}
	if out.ServerVersion == nil || out.ServerVersion.Name == "" {
		t.Errorf("the client saw no serverInfo")
	}
	if !slices.Contains(protocolVersions, out.ProtocolVersion) {
		t.Errorf("negotiated protocol version %q, want one of %q", out.ProtocolVersion, protocolVersions)
	}
	if !slices.Equal(out.Tools, allTools) {
		t.Errorf("tools as alice = %q, want %q", out.Tools, allTools)
	}

	var list struct {
		Bookings []booking `json:"bookings"`
	}
	if out.List.IsError || out.List.Error != nil || json.Unmarshal(out.List.Data, &list) != nil {
		t.Fatalf("booking.list failed: %+v", out.List)
	}
	if len(list.Bookings) != 2 {
		t.Errorf("booking.list as alice: %d bookings, want the 2 seeded", len(list.Bookings))
	}
	if out.OwnBookingID == "" || statusOf(list.Bookings, out.OwnBookingID) == "" {
		t.Fatalf("client picked own booking %q, not one of %+v", out.OwnBookingID, list.Bookings)
	}

	if c := out.CancelOwn; c == nil || c.IsError || c.Error != nil {
		t.Errorf("booking.cancel of alice's own booking failed: %+v", c)
	} else {
		var res struct {
			AlreadyCancelled bool `json:"already_cancelled"`
		}
		if err := json.Unmarshal(c.Data, &res); err != nil || res.AlreadyCancelled {
			t.Errorf("booking.cancel of alice's own booking returned %s", c.Data)
		}
	}

	if out.OtherBookingID == "" {
		t.Fatalf("client found no booking of bob's")
	}
	if c := out.CancelOther; c == nil || c.Error == nil {
		t.Errorf("booking.cancel of bob's booking as alice: %+v, want an MCP error", c)
	} else {
		var data struct {
			Step string `json:"step"`
		}
		json.Unmarshal(c.Error.Data, &data)
		if c.Error.Code != -32003 || data.Step != "ownership" {
			t.Errorf("booking.cancel of bob's booking as alice: error %d %q data %s, want -32003 with step ownership",
				c.Error.Code, c.Error.Message, c.Error.Data)
		}
	}

	// What the client did, checked from the outside with the Go SDK.
	version := out.ProtocolVersion
	if !slices.Contains(protocolVersions, version) {
		version = protocolVersions[0]
	}
	alice := connect(t, h, tokenAlice, version)
	out.tsCatalogue.check(t, alice)
	if st := statusOf(listBookings(t, alice, "alice"), out.OwnBookingID); st != "cancelled" {
		t.Errorf("alice's booking %s has status %q after the client cancelled it, want cancelled", out.OwnBookingID, st)
	}
	if st := statusOf(listBookings(t, connect(t, h, tokenBob, version), "bob"), out.OtherBookingID); st == "cancelled" || st == "" {
		t.Errorf("bob's booking %s has status %q after alice's refused cancel", out.OtherBookingID, st)
	}
}

// tsCatalogue is what js/client.mjs saw of the catalogue: the resource
// templates, the resources of every resources/list page, how many pages,
// the read of room-aurora's record, and platform.search for "aurora".
type tsCatalogue struct {
	ResourceTemplates []struct {
		URITemplate string `json:"uriTemplate"`
		MIMEType    string `json:"mimeType"`
	} `json:"resourceTemplates"`
	Resources []struct {
		URI      string `json:"uri"`
		Name     string `json:"name"`
		MIMEType string `json:"mimeType"`
	} `json:"resources"`
	ResourcePages int `json:"resourcePages"`
	ReadResource  struct {
		Contents []struct {
			URI      string `json:"uri"`
			MIMEType string `json:"mimeType"`
			Text     string `json:"text"`
		} `json:"contents"`
	} `json:"readResource"`
	Search tsCall `json:"search"`
}

// check compares what the TypeScript client saw of the catalogue with what
// the Go SDK client s sees: the one resource template, every resource of
// booking.resources listed exactly once across the pages, the record read by
// URI equal to platform.get's, and platform.search finding the resource by
// its name first.
func (c tsCatalogue) check(t *testing.T, s *session) {
	t.Helper()
	if ts := c.ResourceTemplates; len(ts) != 1 || ts[0].URITemplate != recordTemplate || ts[0].MIMEType != "application/json" {
		t.Errorf("resources/templates/list as alice (TypeScript) = %+v, want the one template %s", ts, recordTemplate)
	}

	records := catalogue(t, s, "alice")
	seen := map[string]int{}
	for _, r := range c.Resources {
		id, ok := strings.CutPrefix(r.URI, recordURI(""))
		if !ok || records[id] == nil || r.Name != id || r.MIMEType != "application/json" {
			t.Errorf("resources/list as alice (TypeScript): %+v is no resource of booking.resources", r)
			continue
		}
		seen[id]++
	}
	for id := range records {
		if seen[id] != 1 {
			t.Errorf("resources/list as alice (TypeScript): %s listed %d times, want once", recordURI(id), seen[id])
		}
	}
	if min := (len(records) + maxResults - 1) / maxResults; c.ResourcePages < min {
		t.Errorf("resources/list as alice (TypeScript): %d resources in %d pages, want at least %d", len(records), c.ResourcePages, min)
	}

	var got struct {
		Record json.RawMessage `json:"record"`
	}
	callTool(t, s, "platform.get", map[string]any{"entity": catalogueEntity, "id": demoResource}).
		mustSucceed(t, "platform.get "+demoResource+" as alice", &got)
	if cs := c.ReadResource.Contents; len(cs) != 1 || cs[0].URI != recordURI(demoResource) || cs[0].MIMEType != "application/json" ||
		!jsonEqual([]byte(cs[0].Text), got.Record) {
		t.Errorf("resources/read %s as alice (TypeScript) = %+v, want platform.get's record %s", recordURI(demoResource), cs, got.Record)
	}

	var hits struct {
		Hits []searchHit `json:"hits"`
	}
	if c.Search.IsError || c.Search.Error != nil || json.Unmarshal(c.Search.Data, &hits) != nil {
		t.Errorf("platform.search \"aurora\" as alice (TypeScript) failed: %+v", c.Search)
	} else if len(hits.Hits) == 0 || hits.Hits[0].Entity != catalogueEntity || hits.Hits[0].ID != demoResource {
		t.Errorf("platform.search \"aurora\" as alice (TypeScript): hits %+v, want %s first", hits.Hits, demoResource)
	}
}
