package booking_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sdktest"
)

// now is the instant every test runs at: Monday 2030-01-07, 09:30 UTC. The
// demo seed books "tomorrow", 2030-01-08.
var now = time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)

const (
	notFound = sdk.CodeNotFound
	invalid  = sdk.CodeInvalidInput
	conflict = sdk.CodeConflict
)

var (
	alice   = sdk.Principal{Role: "customer", Scope: "action", UserID: "alice"}
	bob     = sdk.Principal{Role: "customer", Scope: "action", UserID: "bob"}
	carol   = sdk.Principal{Role: "customer", Scope: "action", UserID: "carol"}
	unbound = sdk.Principal{Role: "customer", Scope: "read"}
	demo    = map[string]any{"seed": "demo"}
)

var idPattern = regexp.MustCompile(`^bk_[a-z2-7]{12}$`)

func newPlugin(at time.Time) *sdk.Plugin {
	p := sdk.New("booking", "test")
	booking.Register(p, booking.WithClock(func() time.Time { return at }))
	return p
}

func start(t *testing.T, config any) *sdktest.Client {
	t.Helper()
	return sdktest.Start(t, newPlugin(now), config)
}

func startIn(t *testing.T, dir string, at time.Time, config any) *sdktest.Client {
	t.Helper()
	c, err := sdktest.StartIn(t, newPlugin(at), config, dir)
	if err != nil {
		t.Fatalf("start in %s: %v", dir, err)
	}
	return c
}

// fail calls a capability that must fail with an error the agent can act
// on (an *sdk.Error, the gate's argument check included) of code, whose
// message contains every one of want.
func fail(t *testing.T, c *sdktest.Client, capability string, pr sdk.Principal, args any, code sdk.ErrorCode, want ...string) {
	t.Helper()
	raw, err := c.Invoke(context.Background(), capability, pr, args)
	var e *sdk.Error
	switch {
	case err == nil:
		t.Fatalf("%s(%v) succeeded with %s; want a %s error", capability, args, raw, code)
	case !errors.As(err, &e):
		t.Fatalf("%s(%v) failed with %v; want a %s error for the agent, not a refusal or an internal failure", capability, args, err, code)
	case e.Code != code:
		t.Fatalf("%s(%v) failed with %v (%s); want code %s", capability, args, e, e.Code, code)
	}
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("%s(%v) message %q; want it to contain %q", capability, args, e.Message, w)
		}
	}
}

// refused calls a capability that the gate must refuse at step, before the
// plugin runs it.
func refused(t *testing.T, c *sdktest.Client, capability string, pr sdk.Principal, args any, step sdk.Step) {
	t.Helper()
	raw, err := c.Invoke(context.Background(), capability, pr, args)
	if got := sdk.RefusedAt(err); got != step {
		t.Fatalf("%s(%v) as %+v = %s, %v (refused at %q); want a refusal at %s", capability, args, pr, raw, err, got, step)
	}
}

func list(t *testing.T, c *sdktest.Client, pr sdk.Principal, args any) []booking.Booking {
	t.Helper()
	return sdktest.Call[booking.ListOut](t, c, "booking.list", pr, args).Bookings
}

func freeStarts(t *testing.T, c *sdktest.Client, args booking.AvailabilityIn) []string {
	t.Helper()
	out := sdktest.Call[booking.AvailabilityOut](t, c, "booking.availability", alice, args)
	starts := make([]string, len(out.FreeSlots))
	for i, s := range out.FreeSlots {
		starts[i] = s.Start
	}
	return starts
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestDescribe(t *testing.T) {
	c := start(t, nil)
	d, err := c.Describe(context.Background())
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if es := d.GetEntities(); len(es) != 1 || es[0].GetName() != "booking.resource" || !strings.Contains(es[0].GetDescription(), "bookable resource") {
		t.Errorf("entities = %v; want only booking.resource (never bookings, which are personal)", es)
	}
	tests := []struct {
		name        string
		kind        capgatev1.Kind
		permission  string
		owner       bool
		destructive bool
		required    []string
	}{
		{"booking.add_resource", capgatev1.Kind_KIND_ACTION, "booking.admin", false, false,
			[]string{"id", "name", "kind", "capacity", "slot_minutes", "opens", "closes"}},
		{"booking.resources", capgatev1.Kind_KIND_READ, "catalogue.read", false, false, nil},
		{"booking.availability", capgatev1.Kind_KIND_READ, "catalogue.read", false, false, []string{"resource_id"}},
		{"booking.list", capgatev1.Kind_KIND_READ, "booking.read", false, false, nil},
		{"booking.get", capgatev1.Kind_KIND_READ, "booking.read", true, false, []string{"id"}},
		{"booking.create", capgatev1.Kind_KIND_ACTION, "booking.write", false, false, []string{"resource_id", "start"}},
		{"booking.cancel", capgatev1.Kind_KIND_ACTION, "booking.write", true, true, []string{"id"}},
	}
	if len(d.GetCapabilities()) != len(tests) {
		t.Fatalf("plugin describes %d capabilities; want %d", len(d.GetCapabilities()), len(tests))
	}
	byName := map[string]*capgatev1.Capability{}
	for _, cp := range d.GetCapabilities() {
		byName[cp.GetName()] = cp
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := byName[tc.name]
			if cp == nil {
				t.Fatalf("%s is not described", tc.name)
			}
			if cp.GetPack() != "booking" || cp.GetKind() != tc.kind || cp.GetPermission() != tc.permission ||
				cp.GetOwnerGuarded() != tc.owner || cp.GetDestructive() != tc.destructive || cp.GetDescription() == "" {
				t.Fatalf("%s described as %v", tc.name, cp)
			}
			var schema struct {
				Type     string   `json:"type"`
				Required []string `json:"required"`
			}
			if err := json.Unmarshal(cp.GetInputSchema(), &schema); err != nil {
				t.Fatalf("input schema: %v", err)
			}
			if schema.Type != "object" || fmt.Sprint(schema.Required) != fmt.Sprint(tc.required) {
				t.Fatalf("input schema type %q requires %v; want object requiring %v", schema.Type, schema.Required, tc.required)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	fileDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(fileDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbageDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(garbageDir, "booking.db"), []byte(strings.Repeat("not sqlite ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		config  any
		dir     string
		wantErr string
	}{
		{"no config block", nil, "", ""},
		{"empty seed", map[string]any{"seed": ""}, "", ""},
		{"demo seed", demo, "", ""},
		{"unknown seed", map[string]any{"seed": "prod"}, "", `seed "prod" is unknown`},
		{"unknown key", map[string]any{"seed": "demo", "dns": "postgres://x"}, "", `"dns"`},
		{"dsn of another engine", map[string]any{"dsn": "mysql://u:s3cret@db/booking"}, "", "dsn must be a postgres:// or postgresql:// URL"},
		{"dsn in key=value form", map[string]any{"dsn": "host=db password=s3cret"}, "", "left out for SQLite"},
		// sdk.Configure decodes the block, naming the option.
		{"dsn of the wrong type", map[string]any{"dsn": 5}, "", "booking config: json: cannot unmarshal number into Go struct field Config.dsn"},
		{"postgres unreachable", map[string]any{"dsn": "postgres://u:s3cret@127.0.0.1:1/booking?connect_timeout=2"}, "",
			"booking config: dsn postgres://u:xxxxx@127.0.0.1:1/booking"},
		{"postgresql URL unparsable", map[string]any{"dsn": "postgresql://u:s3cret@127.0.0.1:port/booking"}, "",
			"booking config: dsn postgresql://(unparsable URL)"},
		{"seed of the wrong type", map[string]any{"seed": 5}, "", "booking config: json: cannot unmarshal number into Go struct field Config.seed"},
		{"data dir is a file", nil, fileDir, "not a directory"},
		{"data dir missing", nil, filepath.Join(t.TempDir(), "gone"), "data directory"},
		{"database file is not a database", nil, garbageDir, "booking.db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = t.TempDir()
			}
			_, err := sdktest.StartIn(t, newPlugin(now), tc.config, dir)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("configure: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("configure error = %v; want it to contain %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("configure error = %v; it shows the password", err)
			}
		})
	}
}

func withoutIDs(bs []booking.Booking) []booking.Booking {
	for i := range bs {
		bs[i].ID = ""
	}
	return bs
}

// TestPostgresReplicas runs the plugin on PostgreSQL (dsn) as two replicas
// starting together on one database: both migrate and seed it, the demo
// data lands once, and each replica sees what the other books.
func TestPostgresReplicas(t *testing.T) {
	config := map[string]any{"seed": "demo", "dsn": pgtest.SchemaDSN(t)}
	var replicas [2]*sdktest.Client
	var errs [2]error
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replicas[i], errs[i] = sdktest.StartIn(t, newPlugin(now), config, t.TempDir())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: configure: %v", i, err)
		}
	}
	onSQLite := start(t, demo)
	wantRes := sdktest.Call[booking.ResourcesOut](t, onSQLite, "booking.resources", alice, nil).Resources
	for i, c := range replicas {
		res := sdktest.Call[booking.ResourcesOut](t, c, "booking.resources", alice, nil).Resources
		if fmt.Sprint(res) != fmt.Sprint(wantRes) {
			t.Fatalf("replica %d lists %d resources; want the %d of the demo seed, once, as on SQLite", i, len(res), len(wantRes))
		}
		// Ids are random: equal between replicas, and otherwise as on SQLite.
		if got, other := list(t, c, alice, nil), list(t, replicas[1-i], alice, nil); fmt.Sprint(got) != fmt.Sprint(other) {
			t.Fatalf("replica %d: alice's bookings %+v; the other replica lists %+v", i, got, other)
		}
		if got, want := withoutIDs(list(t, c, alice, nil)), withoutIDs(list(t, onSQLite, alice, nil)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("replica %d: alice's bookings %+v; want %+v as on SQLite", i, got, want)
		}
	}
	slot := freeStarts(t, replicas[0], booking.AvailabilityIn{ResourceID: wantRes[0].ID})[0]
	b := sdktest.Call[booking.Booking](t, replicas[0], "booking.create", carol, booking.CreateIn{ResourceID: wantRes[0].ID, Start: slot})
	fail(t, replicas[1], "booking.create", bob, booking.CreateIn{ResourceID: wantRes[0].ID, Start: slot}, conflict)
	if got := list(t, replicas[1], carol, nil); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("replica 1 lists carol's bookings as %+v; want the one replica 0 made", got)
	}
}

func TestDemoSeed(t *testing.T) {
	c := start(t, demo)
	res := sdktest.Call[booking.ResourcesOut](t, c, "booking.resources", unbound, nil).Resources
	var ids []string
	for _, r := range res {
		ids = append(ids, r.ID)
		if r.Name == "" || r.Kind == "" || r.Description == "" || r.Location == "" || r.Capacity < 1 {
			t.Errorf("resource %+v is not fully described", r)
		}
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("resources = %v; want unique ids in id order", ids)
	}
	// The original demo resources, which the README and these tests name.
	for _, id := range []string{"court-1", "desk-a1", "desk-a2", "room-aurora", "room-borealis", "room-cirrus", "studio-podcast"} {
		if !slices.Contains(ids, id) {
			t.Errorf("the demo lacks %s", id)
		}
	}
	// Enough variety that searching the catalogue is worth a try: every
	// kind the issue names, and something for everyday searches.
	kinds := map[string]bool{}
	for _, r := range res {
		kinds[r.Kind] = true
	}
	for _, k := range []string{"room", "booth", "desk", "court", "gym", "studio", "parking", "locker", "kitchen"} {
		if !kinds[k] {
			t.Errorf("the demo has no %s", k)
		}
	}
	for _, q := range []string{"projector", "quiet", "standing desk", "tennis", "ev charger", "whiteboard", "video conferencing", "podcast", "photo", "padel", "squash"} {
		var hits []string
		for _, r := range res {
			if strings.Contains(strings.ToLower(r.Name+" "+r.Description+" "+r.Location), q) {
				hits = append(hits, r.ID)
			}
		}
		if len(hits) == 0 {
			t.Errorf("no demo resource mentions %q", q)
		}
	}
	tests := []struct {
		user   sdk.Principal
		starts []string
	}{
		{alice, []string{"room-aurora@2030-01-08T10:00:00Z", "court-1@2030-01-08T14:00:00Z"}},
		{bob, []string{"room-aurora@2030-01-08T14:00:00Z"}},
		{carol, nil},
	}
	for _, tc := range tests {
		t.Run(tc.user.UserID, func(t *testing.T) {
			var got []string
			for _, b := range list(t, c, tc.user, nil) {
				got = append(got, b.ResourceID+"@"+b.Start)
				if !idPattern.MatchString(b.ID) || b.Status != "active" || b.CreatedAt != "2030-01-07T09:30:00Z" {
					t.Errorf("seeded booking %+v", b)
				}
				// Its owner is the user it was seeded for: she may read
				// it, and anyone else is refused at the ownership step.
				if got := sdktest.Call[booking.Booking](t, c, "booking.get", tc.user, booking.IDIn{ID: b.ID}); got != b {
					t.Errorf("%s gets %+v; want her listed %+v", tc.user.UserID, got, b)
				}
				refused(t, c, "booking.get", carol, booking.IDIn{ID: b.ID}, sdk.StepOwnership)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.starts) {
				t.Fatalf("bookings = %v; want %v", got, tc.starts)
			}
		})
	}
}

// TestSeedOnlyOnFirstStart restarts the plugin on the same data: the seed
// does not come back, what happened since is kept.
func TestSeedOnlyOnFirstStart(t *testing.T) {
	dir := t.TempDir()
	first := startIn(t, dir, now, demo)
	seeded := sdktest.Call[booking.ResourcesOut](t, first, "booking.resources", alice, nil).Resources
	bs := list(t, first, alice, nil)
	sdktest.Call[booking.CancelOut](t, first, "booking.cancel", alice, booking.IDIn{ID: bs[0].ID})

	second := startIn(t, dir, now.Add(time.Hour), demo)
	again := list(t, second, alice, nil)
	if len(again) != 2 || again[0].ID != bs[0].ID || again[0].Status != "cancelled" || again[1].ID != bs[1].ID {
		t.Fatalf("after restart alice has %+v; want her two seeded bookings, the first cancelled", again)
	}
	if res := sdktest.Call[booking.ResourcesOut](t, second, "booking.resources", alice, nil).Resources; fmt.Sprint(res) != fmt.Sprint(seeded) {
		t.Fatalf("after restart %d resources; want the %d seeded once, unchanged", len(res), len(seeded))
	}
}

func TestResources(t *testing.T) {
	if got := sdktest.Call[booking.ResourcesOut](t, start(t, nil), "booking.resources", unbound, nil); len(got.Resources) != 0 {
		t.Fatalf("unseeded resources = %+v; want none", got.Resources)
	}
	res := sdktest.Call[booking.ResourcesOut](t, start(t, demo), "booking.resources", unbound, nil).Resources
	byID := map[string]booking.Resource{}
	for _, r := range res {
		byID[r.ID] = r
	}
	tests := []struct {
		id                  string
		slot                int
		opens, closes, kind string
	}{
		{"room-aurora", 60, "08:00", "20:00", "room"},
		{"room-borealis", 30, "08:00", "20:00", "room"},
		{"desk-a1", 240, "08:00", "20:00", "desk"},
		{"court-1", 60, "07:00", "22:00", "court"},
		{"studio-podcast", 90, "09:00", "18:00", "studio"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			r := byID[tc.id]
			if r.SlotMinutes != tc.slot || r.Opens != tc.opens || r.Closes != tc.closes || r.Kind != tc.kind {
				t.Fatalf("%s = %+v; want %s, %d-minute slots %s-%s", tc.id, r, tc.kind, tc.slot, tc.opens, tc.closes)
			}
		})
	}
}

func TestAvailability(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		name       string
		in         booking.AvailabilityIn
		n          int
		first      string
		absent     []string
		from, to   string
		slotMinute int
	}{
		{"today skips started slots", booking.AvailabilityIn{ResourceID: "room-aurora"}, 10, "2030-01-07T10:00:00Z",
			[]string{"2030-01-07T09:00:00Z"}, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z", 60},
		{"tomorrow skips booked slots", booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-08"}, 10, "2030-01-08T08:00:00Z",
			[]string{"2030-01-08T10:00:00Z", "2030-01-08T14:00:00Z"}, "2030-01-08T00:00:00Z", "2030-01-09T00:00:00Z", 60},
		{"two days", booking.AvailabilityIn{ResourceID: "room-aurora", Days: 2}, 20, "2030-01-07T10:00:00Z",
			nil, "2030-01-07T00:00:00Z", "2030-01-09T00:00:00Z", 60},
		{"90-minute slots from 09:00", booking.AvailabilityIn{ResourceID: "studio-podcast", Date: "2030-01-08"}, 6, "2030-01-08T09:00:00Z",
			[]string{"2030-01-08T10:00:00Z"}, "2030-01-08T00:00:00Z", "2030-01-09T00:00:00Z", 90},
		{"fourteen days", booking.AvailabilityIn{ResourceID: "desk-a1", Date: "2030-01-10", Days: 14}, 42, "2030-01-10T08:00:00Z",
			nil, "2030-01-10T00:00:00Z", "2030-01-24T00:00:00Z", 240},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := sdktest.Call[booking.AvailabilityOut](t, c, "booking.availability", unbound, tc.in)
			if len(out.FreeSlots) != tc.n || out.FreeSlots[0].Start != tc.first {
				t.Fatalf("%d free slots starting %+v; want %d starting %s", len(out.FreeSlots), out.FreeSlots[:min(2, len(out.FreeSlots))], tc.n, tc.first)
			}
			if out.From != tc.from || out.To != tc.to || out.SlotMinutes != tc.slotMinute || out.ResourceID != tc.in.ResourceID {
				t.Fatalf("window %s..%s of %s, %d-minute slots; want %s..%s of %s, %d", out.From, out.To, out.ResourceID, out.SlotMinutes, tc.from, tc.to, tc.in.ResourceID, tc.slotMinute)
			}
			for _, s := range out.FreeSlots {
				st, _ := time.Parse(time.RFC3339, s.Start)
				en, _ := time.Parse(time.RFC3339, s.End)
				if en.Sub(st) != time.Duration(tc.slotMinute)*time.Minute || contains(tc.absent, s.Start) {
					t.Fatalf("free slot %+v should not be listed", s)
				}
			}
		})
	}
}

func TestAvailabilityErrors(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		name string
		in   booking.AvailabilityIn
		code sdk.ErrorCode
		want string
	}{
		{"unknown resource", booking.AvailabilityIn{ResourceID: "room-nowhere"}, notFound, `no resource with id "room-nowhere"`},
		{"no resource", booking.AvailabilityIn{}, invalid, "resource_id is required"},
		{"not a date", booking.AvailabilityIn{ResourceID: "room-aurora", Date: "07/01/2030"}, invalid, "YYYY-MM-DD"},
		{"impossible date", booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-02-30"}, invalid, "YYYY-MM-DD"},
		// The gate refuses what the schema bounds, naming the property.
		{"date with time", booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-08T10:00:00Z"}, invalid, "/properties/date: maxLength"},
		{"past date", booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-06"}, invalid, "in the past"},
		{"too far ahead", booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2031-06-01"}, invalid, "too far ahead"},
		{"too many days", booking.AvailabilityIn{ResourceID: "room-aurora", Days: 15}, invalid, "/properties/days: maximum"},
		{"negative days", booking.AvailabilityIn{ResourceID: "room-aurora", Days: -1}, invalid, "/properties/days: minimum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fail(t, c, "booking.availability", unbound, tc.in, tc.code, tc.want)
		})
	}
}

func TestCreate(t *testing.T) {
	c := start(t, demo)
	got := sdktest.Call[booking.Booking](t, c, "booking.create", carol, booking.CreateIn{ResourceID: "room-borealis", Start: "2030-01-08T10:30:00Z"})
	if !idPattern.MatchString(got.ID) || got.ResourceID != "room-borealis" || got.Start != "2030-01-08T10:30:00Z" ||
		got.End != "2030-01-08T11:00:00Z" || got.Status != "active" || got.CreatedAt != "2030-01-07T09:30:00Z" || got.CancelledAt != "" {
		t.Fatalf("created %+v", got)
	}
	if stored := sdktest.Call[booking.Booking](t, c, "booking.get", carol, booking.IDIn{ID: got.ID}); stored != got {
		t.Fatalf("get = %+v; want what create returned, %+v", stored, got)
	}
	if mine := list(t, c, carol, nil); len(mine) != 1 || mine[0] != got {
		t.Fatalf("carol's list = %+v; want just %+v", mine, got)
	}
	// The booking is carol's: anyone else is refused its cancel.
	refused(t, c, "booking.cancel", bob, booking.IDIn{ID: got.ID}, sdk.StepOwnership)
	if free := freeStarts(t, c, booking.AvailabilityIn{ResourceID: "room-borealis", Date: "2030-01-08"}); contains(free, got.Start) {
		t.Fatalf("booked slot %s is still listed free", got.Start)
	}
	// Another zone names the same instant; the answer is in UTC.
	zoned := sdktest.Call[booking.Booking](t, c, "booking.create", carol, booking.CreateIn{ResourceID: "room-cirrus", Start: "2030-01-08T13:00:00+02:00"})
	if zoned.Start != "2030-01-08T11:00:00Z" || zoned.End != "2030-01-08T12:00:00Z" {
		t.Fatalf("zoned create = %+v; want 11:00Z-12:00Z", zoned)
	}
	if zoned.ID == got.ID {
		t.Fatalf("two bookings share id %s", got.ID)
	}
}

func TestCreateErrors(t *testing.T) {
	c := start(t, demo)
	long := strings.Repeat("x", 10_000)
	tests := []struct {
		name string
		pr   sdk.Principal
		in   booking.CreateIn
		code sdk.ErrorCode
		want []string
	}{
		{"unknown resource", carol, booking.CreateIn{ResourceID: "room-nowhere", Start: "2030-01-08T10:00:00Z"}, notFound, []string{`no resource with id "room-nowhere"`, "booking.resources"}},
		{"no resource", carol, booking.CreateIn{Start: "2030-01-08T10:00:00Z"}, invalid, []string{"resource_id is required"}},
		{"no start", carol, booking.CreateIn{ResourceID: "room-aurora"}, invalid, []string{"start is required", "2030-01-08T08:00:00Z"}},
		{"not a time", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "tomorrow at ten"}, invalid, []string{"not an RFC 3339 time", "2030-01-08T08:00:00Z", "60-minute slots"}},
		{"date only", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08"}, invalid, []string{"not an RFC 3339 time"}},
		{"no zone", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T10:00:00"}, invalid, []string{"not an RFC 3339 time"}},
		{"between slots", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T10:15:00Z"}, invalid,
			[]string{"not the start of a slot", "60-minute slots", "from 08:00 to 19:00 UTC", "ends at 20:00"}},
		{"stray seconds", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T11:00:30Z"}, invalid, []string{"not the start of a slot"}},
		{"fraction of a second", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T11:00:00.5Z"}, invalid, []string{"not the start of a slot"}},
		{"before opening", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T07:00:00Z"}, invalid, []string{"not the start of a slot"}},
		{"at closing", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T20:00:00Z"}, invalid, []string{"not the start of a slot"}},
		{"off the 90-minute grid", carol, booking.CreateIn{ResourceID: "studio-podcast", Start: "2030-01-08T10:00:00Z"}, invalid,
			[]string{"90-minute slots", "from 09:00 to 16:30"}},
		{"started slot", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-07T09:00:00Z"}, invalid,
			[]string{"slot 2030-01-07T09:00:00Z of room-aurora is in the past"}},
		{"yesterday", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-06T10:00:00Z"}, invalid, []string{"is in the past"}},
		{"too far ahead", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2031-06-02T10:00:00Z"}, invalid, []string{"too far ahead", "365 days"}},
		{"taken", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T10:00:00Z"}, conflict,
			[]string{"slot 2030-01-08T10:00:00Z of room-aurora is already booked"}},
		{"taken, named in another zone", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T11:00:00+01:00"}, conflict, []string{"already booked"}},
		// The slot's holder asking again (a retry whose answer was lost)
		// is told which of her bookings holds it.
		{"taken by the caller", alice, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T10:00:00Z"}, conflict,
			[]string{"slot 2030-01-08T10:00:00Z of room-aurora is already booked by you, as booking bk_", "booking.get"}},
		// The gate refuses a resource id longer than the schema allows,
		// naming the field, before the plugin runs.
		{"huge resource id", carol, booking.CreateIn{ResourceID: long, Start: "2030-01-08T11:00:00Z"}, invalid, []string{"resource_id", "more than 63"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fail(t, c, "booking.create", tc.pr, tc.in, tc.code, tc.want...)
		})
	}
	// An unbound token acts for nobody: the gate refuses it an action.
	refused(t, c, "booking.create", unbound, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T11:00:00Z"}, sdk.StepUserBinding)
	// Nothing failed half-way: carol still has no bookings and the taken
	// slot still belongs to alice alone.
	if mine := list(t, c, carol, nil); len(mine) != 0 {
		t.Fatalf("failed creates left carol with %+v", mine)
	}
	if hers := list(t, c, alice, nil); len(hers) != 2 {
		t.Fatalf("alice has %d bookings; want her 2", len(hers))
	}
}

// TestConcurrentCreates races real goroutines through the gRPC contract
// onto the real database file: exactly one wins the slot.
func TestConcurrentCreates(t *testing.T) {
	c := start(t, demo)
	const n = 20
	type result struct {
		raw json.RawMessage
		err error
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			pr := sdk.Principal{Role: "customer", Scope: "action", UserID: fmt.Sprintf("racer%02d", i)}
			raw, err := c.Invoke(context.Background(), "booking.create", pr, booking.CreateIn{ResourceID: "court-1", Start: "2030-01-08T18:00:00Z"})
			res[i] = result{raw, err}
		}()
	}
	close(ready)
	wg.Wait()
	var won, lost int
	for i, r := range res {
		switch {
		case r.err == nil:
			won++
		case sdk.CodeOf(r.err) == conflict && strings.Contains(r.err.Error(), "already booked"):
			lost++
		default:
			t.Fatalf("racer %d: %v", i, r.err)
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("%d concurrent creates: %d won, %d conflicts; want 1 and %d", n, won, lost, n-1)
	}
	var holders int
	for i := range n {
		holders += len(list(t, c, sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: fmt.Sprintf("racer%02d", i)}, nil))
	}
	if holders != 1 {
		t.Fatalf("%d racers hold a booking; want 1", holders)
	}
}

func TestGetAndOwnerErrors(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		name string
		id   string
		code sdk.ErrorCode
		want string
	}{
		{"unknown id", "bk_aaaaaaaaaaaa", notFound, `no booking with id "bk_aaaaaaaaaaaa"`},
		{"malformed id", "42", notFound, "booking ids look like bk_"},
		{"upper-case id", "BK_AAAAAAAAAAAA", notFound, "no booking with id"},
		{"empty id", "", invalid, "id is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The ownership step (Owner) answers first, in the same call:
			// its error is the caller's, for both guarded capabilities,
			// and an admin, whom Owner is not asked about, gets the same
			// answer from the handler.
			for _, capability := range []string{"booking.get", "booking.cancel"} {
				fail(t, c, capability, alice, booking.IDIn{ID: tc.id}, tc.code, tc.want)
				fail(t, c, capability, operator, booking.IDIn{ID: tc.id}, tc.code, tc.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	c := start(t, demo)
	hers := list(t, c, alice, nil)
	if len(hers) != 2 {
		t.Fatalf("alice has %d bookings; want 2", len(hers))
	}
	sdktest.Call[booking.CancelOut](t, c, "booking.cancel", alice, booking.IDIn{ID: hers[1].ID})
	tests := []struct {
		name string
		pr   sdk.Principal
		in   booking.ListIn
		want []string
	}{
		{"all, by start", alice, booking.ListIn{}, []string{hers[0].ID, hers[1].ID}},
		{"active", alice, booking.ListIn{Status: "active"}, []string{hers[0].ID}},
		{"cancelled", alice, booking.ListIn{Status: "cancelled"}, []string{hers[1].ID}},
		{"limit", alice, booking.ListIn{Limit: 1}, []string{hers[0].ID}},
		{"a read-only token of alice", sdk.Principal{Role: "customer", Scope: "read", UserID: "alice"}, booking.ListIn{Limit: 200}, []string{hers[0].ID, hers[1].ID}},
		{"someone with none", carol, booking.ListIn{}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := []string{}
			for _, b := range list(t, c, tc.pr, tc.in) {
				got = append(got, b.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("list = %v; want %v", got, tc.want)
			}
		})
	}
	raw, err := c.Invoke(context.Background(), "booking.list", carol, nil)
	if err != nil || !strings.Contains(string(raw), `"bookings":[]`) {
		t.Fatalf("empty list = %s, %v; want an empty array, not null", raw, err)
	}
}

func TestListErrors(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		name string
		pr   sdk.Principal
		in   booking.ListIn
		want string
	}{
		{"unbound token", unbound, booking.ListIn{}, "this token is not bound to a user"},
		{"unknown status", alice, booking.ListIn{Status: "done"}, `status must be "active" or "cancelled", got "done"`},
		// The gate refuses a limit outside the schema's bounds.
		{"limit too high", alice, booking.ListIn{Limit: 500}, "/properties/limit: maximum"},
		{"negative limit", alice, booking.ListIn{Limit: -3}, "/properties/limit: minimum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fail(t, c, "booking.list", tc.pr, tc.in, invalid, tc.want)
		})
	}
}

func TestCancel(t *testing.T) {
	c := start(t, demo)
	target := list(t, c, alice, nil)[0] // room-aurora, 2030-01-08 10:00
	first := sdktest.Call[booking.CancelOut](t, c, "booking.cancel", alice, booking.IDIn{ID: target.ID})
	if first.ID != target.ID || first.Status != "cancelled" || first.AlreadyCancelled || first.CancelledAt != "2030-01-07T09:30:00Z" ||
		first.Start != target.Start || first.End != target.End || first.CreatedAt != target.CreatedAt || !strings.Contains(first.Message, "is cancelled") {
		t.Fatalf("first cancel = %+v", first)
	}
	second := sdktest.Call[booking.CancelOut](t, c, "booking.cancel", alice, booking.IDIn{ID: target.ID})
	if !second.AlreadyCancelled || second.Status != "cancelled" || second.CancelledAt != first.CancelledAt ||
		!strings.Contains(second.Message, "already cancelled at 2030-01-07T09:30:00Z") {
		t.Fatalf("second cancel = %+v; want already_cancelled with the first cancel's time", second)
	}
	got := sdktest.Call[booking.Booking](t, c, "booking.get", alice, booking.IDIn{ID: target.ID})
	if got.Status != "cancelled" || got.CancelledAt != first.CancelledAt {
		t.Fatalf("get after cancel = %+v; want it kept, cancelled", got)
	}
	// The slot is free again, for anyone.
	if free := freeStarts(t, c, booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-08"}); !contains(free, target.Start) {
		t.Fatalf("cancelled slot %s is not listed free: %v", target.Start, free)
	}
	rebooked := sdktest.Call[booking.Booking](t, c, "booking.create", bob, booking.CreateIn{ResourceID: "room-aurora", Start: target.Start})
	if rebooked.ID == target.ID || rebooked.Status != "active" {
		t.Fatalf("rebooking = %+v", rebooked)
	}
	fail(t, c, "booking.cancel", alice, booking.IDIn{ID: "bk_zzzzzzzzzzzz"}, notFound, `no booking with id "bk_zzzzzzzzzzzz"`)
	fail(t, c, "booking.cancel", alice, booking.IDIn{}, invalid, "id is required")
}

// TestCancelStarted uses the same data at two instants: a booking made
// before its slot cannot be cancelled once the slot has begun.
func TestCancelStarted(t *testing.T) {
	dir := t.TempDir()
	before := startIn(t, dir, now, demo)
	b := sdktest.Call[booking.Booking](t, before, "booking.create", carol, booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-07T10:00:00Z"})
	tests := []struct {
		name string
		at   time.Time
	}{
		{"at its start", time.Date(2030, 1, 7, 10, 0, 0, 0, time.UTC)},
		{"during it", time.Date(2030, 1, 7, 10, 30, 0, 0, time.UTC)},
		{"after it", time.Date(2030, 1, 8, 9, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			later := startIn(t, dir, tc.at, nil)
			fail(t, later, "booking.cancel", carol, booking.IDIn{ID: b.ID}, conflict, "started at 2030-01-07T10:00:00Z", "can no longer be cancelled")
			if got := sdktest.Call[booking.Booking](t, later, "booking.get", carol, booking.IDIn{ID: b.ID}); got.Status != "active" {
				t.Fatalf("refused cancel changed the booking: %+v", got)
			}
		})
	}
}

func TestConcurrentCancels(t *testing.T) {
	c := start(t, demo)
	target := list(t, c, bob, nil)[0]
	const n = 20
	outs := make([]booking.CancelOut, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			raw, err := c.Invoke(context.Background(), "booking.cancel", bob, booking.IDIn{ID: target.ID})
			if err == nil {
				err = json.Unmarshal(raw, &outs[i])
			}
			errs[i] = err
		}()
	}
	close(ready)
	wg.Wait()
	var cancelled int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("cancel %d: %v", i, errs[i])
		}
		if !outs[i].AlreadyCancelled {
			cancelled++
		}
		if outs[i].Status != "cancelled" || outs[i].CancelledAt != "2030-01-07T09:30:00Z" {
			t.Fatalf("cancel %d = %+v", i, outs[i])
		}
	}
	if cancelled != 1 {
		t.Fatalf("%d concurrent cancels: %d report cancelling; want exactly 1, the rest already_cancelled", n, cancelled)
	}
}

// TestMalformedArguments sends what an agent might send: every answer,
// the gate's or the plugin's, is an error the agent can act on or a result,
// never a crash, a refusal or an internal failure.
func TestMalformedArguments(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		capability string
		args       string
	}{
		{"booking.create", `{"resource_id": 7, "start": true}`},
		{"booking.create", `{"resource_id": "room-aurora", "start": "2030-01-08T10:00:00Z"`},
		{"booking.create", `[]`},
		{"booking.create", `{"resource_id": "room-aurora", "start": "\u0000"}`},
		{"booking.create", `{"resource_id": "room-aurora", "start": "99999-01-08T10:00:00Z"}`},
		{"booking.create", `{"resource_id": "room-aurora", "start": "0000-01-01T00:00:00Z"}`},
		{"booking.availability", `{"resource_id": "room-aurora", "days": 1e300}`},
		{"booking.availability", `{"resource_id": "room-aurora", "days": 9223372036854775807}`},
		{"booking.availability", `{"resource_id": "room-aurora", "date": "9999-12-31"}`},
		{"booking.list", `{"limit": "ten"}`},
		{"booking.list", `{"limit": -9223372036854775808}`},
		{"booking.get", `{"id": {"$ne": null}}`},
		{"booking.get", `{"id": "bk_' OR '1'='1"}`},
		{"booking.cancel", `null`},
	}
	for _, tc := range tests {
		t.Run(tc.capability+" "+tc.args, func(t *testing.T) {
			raw, err := c.Invoke(context.Background(), tc.capability, alice, json.RawMessage(tc.args))
			if err != nil && sdk.CodeOf(err) == 0 {
				t.Fatalf("failed with %v; want an error for the agent or a result", err)
			}
			if err == nil && !json.Valid(raw) {
				t.Fatalf("result %q is not JSON", raw)
			}
		})
	}
	if hers := list(t, c, alice, nil); len(hers) != 2 {
		t.Fatalf("malformed calls changed alice's bookings: %+v", hers)
	}
}
