package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
	"github.com/capgate/capgate/sdk/sdktest"
)

// catalogueData is a provider's records, shared by every provider plugin
// built over it, so it outlives a "host restart".
type catalogueData struct {
	mu   sync.Mutex
	docs map[string]map[string]sdk.Document // entity → id → document
}

func newData() *catalogueData { return &catalogueData{docs: map[string]map[string]sdk.Document{}} }

func (d *catalogueData) put(entity string, docs ...sdk.Document) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.docs[entity] == nil {
		d.docs[entity] = map[string]sdk.Document{}
	}
	for _, doc := range docs {
		d.docs[entity][doc.ID] = doc
	}
}

func (d *catalogueData) remove(entity, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.docs[entity], id)
}

// providerPlugin provides each entity of versions (name → version) from d.
func providerPlugin(d *catalogueData, versions map[string]string) *sdk.Plugin {
	p := sdk.New("provider", "test")
	names := make([]string, 0, len(versions))
	for n := range versions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p.ProvideEntity(sdk.Entity{Name: name, Description: "test records of " + name, Version: versions[name], Source: sdk.EntityFuncs{
			List: func(_ context.Context, after string, limit int) ([]sdk.Document, error) {
				d.mu.Lock()
				defer d.mu.Unlock()
				var out []sdk.Document
				for _, doc := range d.docs[name] {
					if doc.ID > after {
						out = append(out, doc)
					}
				}
				slices.SortFunc(out, func(a, b sdk.Document) int { return strings.Compare(a.ID, b.ID) })
				return out[:min(limit, len(out))], nil
			},
			Get: func(_ context.Context, ids []string) ([]sdk.Document, error) {
				d.mu.Lock()
				defer d.mu.Unlock()
				var out []sdk.Document
				for _, id := range ids {
					if doc, ok := d.docs[name][id]; ok {
						out = append(out, doc)
					}
				}
				return out, nil
			},
			GetRecord: func(_ context.Context, id string) (any, error) {
				if strings.HasPrefix(id, failID) {
					return nil, errors.New("the provider's store is down")
				}
				d.mu.Lock()
				defer d.mu.Unlock()
				doc, ok := d.docs[name][id]
				if !ok {
					return nil, sdk.NotFound("no %s with id %q", name, id)
				}
				return map[string]any{"id": doc.ID, "name": doc.Title, "description": doc.Body, "seats": 12345678901}, nil
			},
		}})
	}
	return p
}

// failID starts the ids whose record the test provider fails to read with
// an internal error.
const failID = "fail-"

// logBuf collects the search plugin's log as JSON lines.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

// records returns the logged records whose message is msg.
func (l *logBuf) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// env is one "host run": a provider and the search plugin over dataDir.
type env struct {
	host   *sdktest.Host
	client *sdktest.Client
	svc    *service
	log    *logBuf
}

// tbWrap gives sdktest.NewHost another testing.TB value, and so a host
// (and bus) with another id: sdktest names a host's bus after its TB.
type tbWrap struct{ testing.TB }

type runOpts struct {
	dataDir  string
	newBus   bool       // a bus with a new id (as after a restart of an in-process bus)
	busOf    testing.TB // the TB whose bus id to use (sdktest names a bus after its TB); t when nil
	rebuild  bool
	versions map[string]string
	replay   []sdktest.Event // published before start, as a persistent bus still holds them
	config   any             // the search plugin's config block; none when nil
}

// run starts a host with a provider over d and the search plugin.
func run(t *testing.T, d *catalogueData, o runOpts) *env {
	t.Helper()
	var tb testing.TB = t
	if o.busOf != nil {
		tb = o.busOf
	}
	if o.newBus {
		tb = &tbWrap{t}
	}
	if o.versions == nil {
		o.versions = map[string]string{entRoom: "1", entClass: "1"}
	}
	h := sdktest.NewHost(tb)
	if _, err := h.Add(providerPlugin(d, o.versions), nil, ""); err != nil {
		t.Fatal(err)
	}
	lb := &logBuf{}
	p := sdk.New("search", "test")
	svc := register(p, WithLogger(slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	c, err := h.Add(p, o.config, o.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	// Close the plugin before the host's connections go (cleanups run
	// last first); the host's own stop closes it again, harmlessly.
	t.Cleanup(func() {
		if err := svc.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	for _, ev := range o.replay {
		h.Publish("provider", ev)
	}
	if err := h.Start(context.Background(), o.rebuild); err != nil {
		t.Fatal(err)
	}
	return &env{host: h, client: c, svc: svc, log: lb}
}

// stop ends the run's search plugin, as the host does when it stops.
func (e *env) stop(t *testing.T) {
	t.Helper()
	if err := e.svc.close(); err != nil {
		t.Fatal(err)
	}
}

// ready is the "search index ready" record of the run.
func (e *env) ready(t *testing.T) map[string]any {
	t.Helper()
	rs := e.log.records(t, "search index ready")
	if len(rs) != 1 {
		t.Fatalf("%d \"search index ready\" lines, want 1", len(rs))
	}
	return rs[0]
}

func syncedOf(r map[string]any) []string {
	out := []string{}
	for _, v := range r["entities"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

var reader = sdk.Principal{Role: "customer", Scope: "read"}

func (e *env) search(t *testing.T, in platform.SearchIn) platform.SearchOut {
	t.Helper()
	return sdktest.Call[platform.SearchOut](t, e.client, platform.SearchName, reader, in)
}

// toolError calls capability through the gate and returns the failure the
// agent gets, failing the test on a success or any other error.
func (e *env) toolError(t *testing.T, capability string, args any) *sdk.Error {
	t.Helper()
	raw, err := e.client.Invoke(context.Background(), capability, reader, args)
	var te *sdk.Error
	if !errors.As(err, &te) {
		t.Fatalf("%s %.200v: result %s, error %v; want a tool error", capability, args, raw, err)
	}
	return te
}

// direct calls the capability's handler itself, as a caller that skipped
// the host's gate would reach the plugin, and returns its error.
func (e *env) direct(t *testing.T, args any) error {
	t.Helper()
	ctx := context.Background()
	var err error
	switch in := args.(type) {
	case platform.SearchIn:
		_, err = e.svc.search(ctx, sdk.Call{}, in)
	case platform.GetIn:
		_, err = e.svc.get(ctx, sdk.Call{}, in)
	case platform.ListIn:
		_, err = e.svc.list(ctx, sdk.Call{}, in)
	default:
		t.Fatalf("no capability takes %T", args)
	}
	return err
}

// hitIDs returns entity/id of each hit.
func hitIDs(out platform.SearchOut) []string {
	ids := make([]string, len(out.Hits))
	for i, h := range out.Hits {
		ids[i] = h.Entity + "/" + h.ID
	}
	return ids
}

// eventually polls cond every 10ms for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func found(t *testing.T, e *env, query, want string) func() bool {
	return func() bool { return slices.Contains(hitIDs(e.search(t, platform.SearchIn{Query: query})), want) }
}

// Entities of the test catalogue.
const (
	entRoom  = "venue.room"
	entClass = "course.class"
)

// smallCatalogue is a few rooms and classes.
func smallCatalogue() *catalogueData {
	d := newData()
	d.put(entRoom,
		sdk.Document{ID: "aurora", Title: "Aurora conference room", Body: "A large room with a projector and a long table for twelve.", Fields: map[string]string{"location": "north wing"}},
		sdk.Document{ID: "zephyr", Title: "Zephyr meeting room", Body: "A small quiet room for four.", Fields: map[string]string{"location": "south wing"}},
		sdk.Document{ID: "harbour", Title: "Harbourside studio", Body: "Mirrors, a sprung floor and a sound system; the room meeting point is at reception."},
	)
	d.put(entClass,
		sdk.Document{ID: "yoga-1", Title: "Morning yoga", Body: "Gentle yoga for beginners in the Zephyr garden."},
		sdk.Document{ID: "kettle", Title: "Kettlebell basics", Body: "Strength training with kettlebells."},
	)
	return d
}

func manyDocs(d *catalogueData, entity string, n int) []string {
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%03d", strings.ReplaceAll(entity, ".", "-"), i)
		d.put(entity, sdk.Document{ID: id, Title: fmt.Sprintf("Lantern %d", i), Body: "a lantern lit hall"})
		ids = append(ids, entity+"/"+id)
	}
	return ids
}
