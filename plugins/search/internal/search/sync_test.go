package search

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
	"github.com/capgate/capgate/sdk/sdktest"
)

func upsert(entity, id string) sdktest.Event {
	return sdktest.Event{Type: EventUpsert, Entity: entity, ID: id}
}

func TestFreshness(t *testing.T) {
	d := smallCatalogue()
	e := run(t, d, runOpts{})

	// A new record becomes searchable.
	d.put(entRoom, sdk.Document{ID: "nebula", Title: "Nebula lounge", Body: "Sofas and a piano."})
	e.host.Publish("provider", upsert(entRoom, "nebula"))
	eventually(t, "nebula is found", found(t, e, "nebula", entRoom+"/nebula"))

	// A changed title: the new one is found, the old one no longer.
	d.put(entRoom, sdk.Document{ID: "nebula", Title: "Quasar lounge", Body: "Sofas and a piano."})
	e.host.Publish("provider", upsert(entRoom, "nebula"))
	eventually(t, "quasar is found", found(t, e, "quasar", entRoom+"/nebula"))
	if hits := hitIDs(e.search(t, platform.SearchIn{Query: "nebula"})); len(hits) != 0 {
		t.Errorf("old title still found: %v", hits)
	}

	// A delete event removes it.
	d.remove(entRoom, "nebula")
	e.host.Publish("provider", sdktest.Event{Type: EventDelete, Entity: entRoom, ID: "nebula"})
	eventually(t, "quasar is gone", func() bool { return len(e.search(t, platform.SearchIn{Query: "quasar"}).Hits) == 0 })

	// An upsert of a record its provider no longer has removes it too.
	d.remove(entClass, "kettle")
	e.host.Publish("provider", upsert(entClass, "kettle"))
	eventually(t, "kettle is gone", func() bool { return len(e.search(t, platform.SearchIn{Query: "kettlebell"}).Hits) == 0 })

	// The log line follows the commit, so it may trail the search by a moment.
	eventually(t, "4 events are logged as applied", func() bool { return len(e.log.records(t, "applied catalogue event")) == 4 })
	// platform.list follows the index.
	page := sdktest.Call[platform.ListOut](t, e.client, platform.ListName, reader, platform.ListIn{Entity: entClass})
	if len(page.Items) != 1 || page.Items[0].ID != "yoga-1" {
		t.Errorf("list %+v", page.Items)
	}
}

func TestEventsOfUnknownEntitiesAreSkipped(t *testing.T) {
	d := smallCatalogue()
	e := run(t, d, runOpts{})
	e.host.Publish("provider", upsert("shop.item", "x1"))
	e.host.Publish("provider", sdktest.Event{Type: EventDelete, Entity: "shop.item", ID: "x2"})
	e.host.Publish("provider", sdktest.Event{Type: "booking.created", Entity: entRoom, ID: "aurora"})
	d.put(entRoom, sdk.Document{ID: "comet", Title: "Comet booth"})
	last := e.host.Publish("provider", upsert(entRoom, "comet"))
	eventually(t, "comet is found", found(t, e, "comet", entRoom+"/comet"))
	eventually(t, "comet is logged", func() bool { return len(e.log.records(t, "applied catalogue event")) > 0 })
	applied := e.log.records(t, "applied catalogue event")
	if len(applied) != 1 || applied[0]["entity"] != entRoom || applied[0]["id"] != "comet" || applied[0]["cursor"] != float64(last) {
		t.Errorf("applied %v, want only the comet upsert at cursor %d", applied, last)
	}
}

// TestRestart runs the plugin over one data directory several times, as a
// host restarting does.
func TestRestart(t *testing.T) {
	top := t // the bus of every run but the new-bus ones: a persistent bus
	dir := t.TempDir()
	d := smallCatalogue()
	v1 := map[string]string{entRoom: "1", entClass: "1"}

	// First run: a full sync, then one event.
	e := run(t, d, runOpts{dataDir: dir, versions: v1})
	if r := e.ready(t); r["resumed"] != false || !slices.Equal(syncedOf(r), []string{entClass, entRoom}) {
		t.Fatalf("first start: %v", r)
	}
	d.put(entRoom, sdk.Document{ID: "comet", Title: "Comet booth"})
	e.host.Publish("provider", upsert(entRoom, "comet"))
	eventually(t, "comet is found", found(t, e, "comet", entRoom+"/comet"))
	e.stop(t)
	bus := e.host.Events() // what a persistent bus still holds

	t.Run("same bus resumes without resync and applies only new events", func(t *testing.T) {
		// A record changed while the plugin was down, without an event: a
		// resumed index does not notice (that is what rebuild is for).
		d.put(entClass, sdk.Document{ID: "pilates", Title: "Pilates mat class"})
		d.put(entRoom, sdk.Document{ID: "meteor", Title: "Meteor booth"})
		e := run(t, d, runOpts{busOf: top, dataDir: dir, versions: v1, replay: append(slices.Clone(bus), upsert(entRoom, "meteor"))})
		r := e.ready(t)
		if r["resumed"] != true || len(syncedOf(r)) != 0 || r["cursor"] != float64(1) {
			t.Fatalf("restart on the same bus: %v", r)
		}
		eventually(t, "meteor is found", found(t, e, "meteor", entRoom+"/meteor"))
		eventually(t, "meteor is logged", func() bool { return len(e.log.records(t, "applied catalogue event")) > 0 })
		applied := e.log.records(t, "applied catalogue event")
		if len(applied) != 1 || applied[0]["id"] != "meteor" || applied[0]["cursor"] != float64(2) {
			t.Errorf("applied %v, want only meteor at cursor 2", applied)
		}
		if hits := e.search(t, platform.SearchIn{Query: "pilates"}).Hits; len(hits) != 0 {
			t.Errorf("a resumed index resynced: %v", hits)
		}
		if !slices.Contains(hitIDs(e.search(t, platform.SearchIn{Query: "comet"})), entRoom+"/comet") {
			t.Error("comet lost across the restart")
		}
		e.stop(t)
		bus = e.host.Events()
	})

	t.Run("provider version change resyncs that entity only", func(t *testing.T) {
		d.remove(entRoom, "zephyr") // no event: only a resync notices
		e := run(t, d, runOpts{busOf: top, dataDir: dir, versions: map[string]string{entRoom: "2", entClass: "1"}, replay: bus})
		r := e.ready(t)
		if r["resumed"] != true || !slices.Equal(syncedOf(r), []string{entRoom}) {
			t.Fatalf("restart with a new version: %v", r)
		}
		if hits := hitIDs(e.search(t, platform.SearchIn{Query: "zephyr"})); slices.Contains(hits, entRoom+"/zephyr") {
			t.Errorf("removed room still found: %v", hits)
		}
		if hits := e.search(t, platform.SearchIn{Query: "pilates"}).Hits; len(hits) != 0 {
			t.Errorf("the unchanged entity resynced: %v", hits)
		}
		if n := len(e.log.records(t, "applied catalogue event")); n != 0 {
			t.Errorf("%d events applied again", n)
		}
		e.stop(t)
	})

	t.Run("rebuild empties and resyncs everything", func(t *testing.T) {
		e := run(t, d, runOpts{busOf: top, dataDir: dir, versions: map[string]string{entRoom: "2", entClass: "1"}, replay: bus, rebuild: true})
		r := e.ready(t)
		if r["resumed"] != false || !slices.Equal(syncedOf(r), []string{entClass, entRoom}) {
			t.Fatalf("rebuild: %v", r)
		}
		if len(e.log.records(t, "search index emptied for a rebuild")) != 1 {
			t.Error("no rebuild logged")
		}
		if !slices.Contains(hitIDs(e.search(t, platform.SearchIn{Query: "pilates"})), entClass+"/pilates") {
			t.Error("rebuild missed pilates")
		}
		assertIndexMatches(t, e, d)
		e.stop(t)
	})

	t.Run("new bus resyncs everything", func(t *testing.T) {
		d.put(entClass, sdk.Document{ID: "spin", Title: "Spinning class"})
		e := run(t, d, runOpts{dataDir: dir, versions: map[string]string{entRoom: "2", entClass: "1"}, newBus: true})
		r := e.ready(t)
		if r["resumed"] != false || !slices.Equal(syncedOf(r), []string{entClass, entRoom}) || r["cursor"] != float64(0) {
			t.Fatalf("restart on a new bus: %v", r)
		}
		assertIndexMatches(t, e, d)
		// The new bus's cursors start over, and its events apply.
		d.put(entRoom, sdk.Document{ID: "orbit", Title: "Orbit room"})
		e.host.Publish("provider", upsert(entRoom, "orbit"))
		eventually(t, "orbit is found", found(t, e, "orbit", entRoom+"/orbit"))
		e.stop(t)
	})

	t.Run("entity types no longer provided are dropped", func(t *testing.T) {
		e := run(t, d, runOpts{dataDir: dir, versions: map[string]string{entRoom: "2"}, newBus: true})
		if hits := e.search(t, platform.SearchIn{Query: "yoga"}).Hits; len(hits) != 0 {
			t.Errorf("a dropped type is still found: %v", hits)
		}
		page := sdktest.Call[platform.ListOut](t, e.client, platform.ListName, reader, platform.ListIn{Limit: 20})
		for _, it := range page.Items {
			if it.Entity != entRoom {
				t.Errorf("listed %+v", it)
			}
		}
		e.stop(t)
	})
}

// assertIndexMatches checks that platform.list lists exactly d's records.
func assertIndexMatches(t *testing.T, e *env, d *catalogueData) {
	t.Helper()
	var want []string
	d.mu.Lock()
	for ent, docs := range d.docs {
		for id := range docs {
			want = append(want, ent+"/"+id)
		}
	}
	d.mu.Unlock()
	slices.Sort(want)
	var got []string
	cursor := ""
	for {
		page := sdktest.Call[platform.ListOut](t, e.client, platform.ListName, reader, platform.ListIn{Cursor: cursor})
		for _, it := range page.Items {
			got = append(got, it.Entity+"/"+it.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("index holds\n%v\nprovider has\n%v", got, want)
	}
}

func TestConfigure(t *testing.T) {
	t.Run("unknown key", func(t *testing.T) {
		h := sdktest.NewHost(t)
		p := sdk.New("search", "test")
		register(p)
		_, err := h.Add(p, map[string]any{"language": "en"}, "")
		if err == nil || !strings.Contains(err.Error(), "language") {
			t.Fatalf("configure with an unknown key: %v", err)
		}
	})
	t.Run("index in use", func(t *testing.T) {
		dir := t.TempDir()
		e := run(t, smallCatalogue(), runOpts{dataDir: dir})
		p := sdk.New("search", "test")
		register(p)
		_, err := sdktest.NewHost(&tbWrap{t}).Add(p, nil, dir)
		if err == nil || !strings.Contains(err.Error(), "is in use by another process: is another capgate serving this data_dir?") {
			t.Fatalf("second plugin over the same data dir: %v", err)
		}
		e.stop(t)
	})
	t.Run("not started", func(t *testing.T) {
		p := sdk.New("search", "test")
		svc := register(p)
		if _, err := sdktest.NewHost(t).Add(p, nil, ""); err != nil {
			t.Fatal(err)
		}
		defer svc.close()
		// The host sends no call before it starts the plugin (sdktest
		// refuses to); one that came would find no catalogue yet.
		if _, err := svc.search(context.Background(), sdk.Call{}, platform.SearchIn{Query: "x"}); !errors.Is(err, errNotReady) {
			t.Errorf("search before start: %v, want %v", err, errNotReady)
		}
	})
}
