package mcptest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/platform"
)

// Catalogue capabilities WithRecords registers, on the platform contract
// (sdk/platform) the host's own follow.
const (
	RecordGet  = platform.GetName
	RecordList = platform.ListName
	// RecordPageSize is platform.list's default page size: small, so the
	// few records span several pages.
	RecordPageSize = 2
)

// Entity is one catalogue entity type.
type Entity struct{ Name, Description string }

// Entities are the entity types of Records, in name order.
var Entities = []Entity{
	{Name: "booking.resource", Description: "A bookable room or desk."},
	{Name: "booking.service", Description: "A service that can be booked."},
}

// Record is one catalogue record; Data is what platform.get returns as
// "record".
type Record struct {
	Entity, ID, Title string
	Data              json.RawMessage
}

// Records are the catalogue, in (entity, id) order as platform.list pages
// them. Some ids need percent-encoding in a URI.
var Records = []Record{
	{"booking.resource", "café", "Café corner", json.RawMessage(`{"name":"Café corner","seats":2,"tags":["quiet"]}`)},
	{"booking.resource", "room a/2", "Room A/2", json.RawMessage(`{"name":"Room A/2","seats":8,"note":"\"big\" <room> & more"}`)},
	{"booking.resource", "room-1", "Room 1", json.RawMessage(`{"name":"Room 1","seats":4}`)},
	{"booking.service", "haircut", "Haircut", json.RawMessage(`{"name":"Haircut","minutes":30}`)},
	{"booking.service", "massage", "Massage", json.RawMessage(`{"name":"Massage","minutes":60}`)},
}

var recordCapabilities = []registry.Capability{
	{
		Name: RecordGet, Description: "Read one catalogue record.", Kind: registry.Read,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"entity":{"type":"string","minLength":1},"id":{"type":"string","minLength":1}},
			"required":["entity","id"],"additionalProperties":false}`),
		Pack: "search", Permission: "catalogue.read", Plugin: "core",
	},
	{
		Name: RecordList, Description: "List catalogue records.", Kind: registry.Read,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"entity":{"type":"string"},"cursor":{"type":"string"},
			"limit":{"type":"integer","minimum":1,"maximum":100}},"additionalProperties":false}`),
		Pack: "search", Permission: "catalogue.read", Plugin: "core",
	},
}

func getRecord(args json.RawMessage) (json.RawMessage, error) {
	var a platform.GetIn
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("decode args: %w", err)
	}
	for _, r := range Records {
		if r.Entity == a.Entity && r.ID == a.ID {
			var rec platform.Record
			if err := json.Unmarshal(r.Data, &rec); err != nil {
				return nil, fmt.Errorf("record %s %q: %w", r.Entity, r.ID, err)
			}
			return json.Marshal(platform.GetOut{Entity: r.Entity, ID: r.ID, Record: rec})
		}
	}
	return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: fmt.Sprintf("%s %q does not exist", a.Entity, a.ID)}
}

// listRecords pages Records; a cursor is "o<offset>" into the (filtered)
// list.
func listRecords(args json.RawMessage) (json.RawMessage, error) {
	var a platform.ListIn
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("decode args: %w", err)
	}
	if a.Limit == 0 {
		a.Limit = RecordPageSize
	}
	var all []Record
	for _, r := range Records {
		if a.Entity == "" || r.Entity == a.Entity {
			all = append(all, r)
		}
	}
	offset := 0
	if a.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(a.Cursor, "o"))
		if !strings.HasPrefix(a.Cursor, "o") || err != nil || n <= 0 || n >= len(all) {
			return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf("invalid cursor %q", a.Cursor)}
		}
		offset = n
	}
	page := platform.ListOut{Items: []platform.Item{}}
	end := min(offset+a.Limit, len(all))
	for _, r := range all[offset:end] {
		page.Items = append(page.Items, platform.Item{Entity: r.Entity, ID: r.ID, Title: r.Title})
	}
	if end < len(all) {
		page.NextCursor = "o" + strconv.Itoa(end)
	}
	return json.Marshal(page)
}
