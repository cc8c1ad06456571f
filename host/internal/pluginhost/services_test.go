package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
)

// serve runs register's services on a loopback gRPC server for the test
// and returns a client connection to it.
func serve(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

var shelf = map[string]string{"b1": "Dune", "b2": "Emma", "b3": "Ulysses"}

// library is a provider plugin of "library.book", served over real gRPC by
// the SDK, as a plugin process would serve it.
func library(t *testing.T) *Plugin {
	p := sdk.New("library", "1.0.0")
	doc := func(id string) sdk.Document { return sdk.Document{ID: id, Title: shelf[id]} }
	p.ProvideEntity(sdk.Entity{
		Name: "library.book", Description: "a book", Version: "7",
		Source: sdk.EntityFuncs{
			List: func(_ context.Context, after string, limit int) ([]sdk.Document, error) {
				var out []sdk.Document
				for _, id := range []string{"b1", "b2", "b3"} {
					if id > after && len(out) < limit {
						out = append(out, doc(id))
					}
				}
				return out, nil
			},
			Get: func(_ context.Context, ids []string) ([]sdk.Document, error) {
				var out []sdk.Document
				for _, id := range ids {
					if _, ok := shelf[id]; ok {
						out = append(out, doc(id))
					}
				}
				return out, nil
			},
			GetRecord: func(_ context.Context, id string) (any, error) {
				title, ok := shelf[id]
				if !ok {
					return nil, sdk.NotFound("no book %q", id)
				}
				return map[string]string{"id": id, "title": title}, nil
			},
		},
	})
	rpc := capgatev1.NewPluginServiceClient(serve(t, func(s *grpc.Server) {
		capgatev1.RegisterPluginServiceServer(s, sdkserver.NewServer(p))
	}))
	ctx := context.Background()
	if _, err := rpc.Configure(ctx, &capgatev1.ConfigureRequest{ConfigJson: []byte("{}"), DataDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	d, err := rpc.Describe(ctx, &capgatev1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return servedPlugin(Spec{Name: "library"}, rpc, d)
}

// servicesFixture is a host with the library plugin, and the host services
// as a plugin named "indexer" reaches them.
func servicesFixture(t *testing.T, bufferSize int) (*Host, events.Bus, capgatev1.HostServiceClient) {
	t.Helper()
	bus := eventstest.Embedded(t, bufferSize)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &Host{log: log, services: &services{bus: bus, log: log}, plugins: []*Plugin{library(t)}}
	client := capgatev1.NewHostServiceClient(serve(t, func(s *grpc.Server) {
		capgatev1.RegisterHostServiceServer(s, hostService{plugin: "indexer", svc: h.services})
	}))
	return h, bus, client
}

func publish(t *testing.T, bus events.Bus, n int, typ string) []uint64 {
	t.Helper()
	var cursors []uint64
	for i := range n {
		c, err := bus.Publish(context.Background(), events.Event{Type: typ, Entity: "library.book", ID: fmt.Sprintf("b%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
	}
	return cursors
}

func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	s, _ := status.FromError(err)
	if s.Code() != code || !strings.Contains(s.Message(), msg) {
		t.Errorf("%s: %v; want %s containing %q", what, err, code, msg)
	}
}

func TestCatalogueServicesWaitForStart(t *testing.T) {
	_, _, client := servicesFixture(t, 10)
	ctx := context.Background()
	_, err := client.Catalogue(ctx, &capgatev1.CatalogueRequest{})
	wantCode(t, "catalogue", err, codes.FailedPrecondition, "OnStart")
	_, err = client.Documents(ctx, &capgatev1.DocumentsRequest{Entity: "library.book"})
	wantCode(t, "documents", err, codes.FailedPrecondition, "OnStart")
	_, err = client.Record(ctx, &capgatev1.RecordRequest{Entity: "library.book", Id: "b1"})
	wantCode(t, "record", err, codes.FailedPrecondition, "OnStart")
}

func TestCatalogueServicesForward(t *testing.T) {
	h, _, client := servicesFixture(t, 10)
	ctx := context.Background()
	if err := h.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	cat, err := client.Catalogue(ctx, &capgatev1.CatalogueRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Entities) != 1 {
		t.Fatalf("catalogue = %v, want library.book alone", cat.Entities)
	}
	if e := cat.Entities[0]; e.Name != "library.book" || e.Provider != "library" || e.Version != "7" || e.Description != "a book" {
		t.Errorf("entity = %v, want library.book by library, version 7", e)
	}

	var pages [][]string
	for after, more := "", true; more; {
		resp, err := client.Documents(ctx, &capgatev1.DocumentsRequest{Entity: "library.book", After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range resp.Documents {
			ids = append(ids, d.Id)
			after = d.Id
		}
		pages, more = append(pages, ids), resp.More
	}
	if fmt.Sprint(pages) != "[[b1 b2] [b3]]" {
		t.Errorf("pages = %v, want [[b1 b2] [b3]]", pages)
	}
	byID, err := client.Documents(ctx, &capgatev1.DocumentsRequest{Entity: "library.book", Ids: []string{"b3", "nope"}})
	if err != nil || len(byID.Documents) != 1 || byID.Documents[0].Title != "Ulysses" {
		t.Errorf("documents by id = %v, %v; want Ulysses alone", byID, err)
	}

	rec, err := client.Record(ctx, &capgatev1.RecordRequest{Entity: "library.book", Id: "b2"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(rec.Record, &got); err != nil || got["title"] != "Emma" {
		t.Errorf("record = %s (%v), want Emma", rec.Record, err)
	}
	rec, err = client.Record(ctx, &capgatev1.RecordRequest{Entity: "library.book", Id: "b9"})
	if err != nil || rec.GetError().GetCode() != capgatev1.ToolError_CODE_NOT_FOUND {
		t.Errorf("record of a missing id = %v, %v; want the provider's NotFound", rec, err)
	}

	_, err = client.Documents(ctx, &capgatev1.DocumentsRequest{Entity: "shop.product"})
	wantCode(t, "documents of an unprovided type", err, codes.NotFound, `no plugin provides entity type "shop.product"`)
	_, err = client.Record(ctx, &capgatev1.RecordRequest{Entity: "shop.product", Id: "x"})
	wantCode(t, "record of an unprovided type", err, codes.NotFound, `"shop.product"`)
}

func TestBusState(t *testing.T) {
	_, bus, client := servicesFixture(t, 3)
	ctx := context.Background()
	cursors := publish(t, bus, 5, "library.lent")
	st, err := client.Bus(ctx, &capgatev1.BusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := bus.State(ctx)
	if st.Id != want.ID || st.Oldest != cursors[2] || st.Last != cursors[4] {
		t.Errorf("bus = %v, want id %s, oldest %d, last %d", st, want.ID, cursors[2], cursors[4])
	}
}

// recv reads n events from stream, failing after a deadline.
func recv(t *testing.T, stream grpc.ServerStreamingClient[capgatev1.BusEvent], n int) []*capgatev1.BusEvent {
	t.Helper()
	var out []*capgatev1.BusEvent
	for len(out) < n {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
	return out
}

func TestSubscribeFiltersAndFollows(t *testing.T) {
	_, bus, client := servicesFixture(t, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lent := publish(t, bus, 3, "library.lent")
	returned := publish(t, bus, 2, "library.returned")

	stream, err := client.Subscribe(ctx, &capgatev1.SubscribeRequest{After: lent[0], Types: []string{"library.lent"}})
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, stream, 2)
	later := publish(t, bus, 1, "library.lent")
	got = append(got, recv(t, stream, 1)...)
	var cursors []uint64
	for _, ev := range got {
		cursors = append(cursors, ev.Cursor)
		if ev.Type != "library.lent" || ev.Entity != "library.book" || ev.AtUnixNano == 0 {
			t.Errorf("event %v: want a library.lent event with its time", ev)
		}
	}
	if want := []uint64{lent[1], lent[2], later[0]}; !slices.Equal(cursors, want) {
		t.Errorf("cursors = %v, want %v (the returned events %v filtered out)", cursors, want, returned)
	}
}

func TestSubscribeRefusesLostCursors(t *testing.T) {
	_, bus, client := servicesFixture(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cursors := publish(t, bus, 10, "library.lent")
	for _, tc := range []struct {
		name  string
		after uint64
		msg   string
	}{
		{"older than retained", cursors[2], "no longer retained: the oldest is 8"},
		{"beyond the newest", cursors[9] + 5, "kept under another bus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, err := client.Subscribe(ctx, &capgatev1.SubscribeRequest{After: tc.after})
			if err == nil {
				_, err = stream.Recv()
			}
			wantCode(t, "subscribe", err, codes.OutOfRange, tc.msg)
		})
	}
	// Right at the edge of the window nothing is lost.
	stream, err := client.Subscribe(ctx, &capgatev1.SubscribeRequest{After: cursors[6]})
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, stream, 3); got[0].Cursor != cursors[7] {
		t.Errorf("first event %d, want %d", got[0].Cursor, cursors[7])
	}
}

// A subscriber that does not read while the bus moves past its window gets
// DATA_LOSS instead of a silent gap.
func TestSubscribeEndsOnGap(t *testing.T) {
	_, bus, client := servicesFixture(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := publish(t, bus, 1, "library.lent")
	stream, err := client.Subscribe(ctx, &capgatev1.SubscribeRequest{After: start[0]})
	if err != nil {
		t.Fatal(err)
	}
	// Large events fill the stream's flow-control windows, so the host's
	// sender blocks while the bus keeps only the last four.
	data, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 48<<10)})
	for i := range 200 {
		if _, err := bus.Publish(ctx, events.Event{Type: "library.lent", Entity: "library.book", ID: fmt.Sprint(i), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	prev := start[0]
	for {
		ev, err := stream.Recv()
		if err != nil {
			wantCode(t, "recv", err, codes.DataLoss, "dropped before delivery")
			return
		}
		if ev.Cursor != prev+1 {
			t.Fatalf("event %d after %d: a gap was delivered silently", ev.Cursor, prev)
		}
		prev = ev.Cursor
	}
}
