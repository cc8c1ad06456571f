package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/internal/pluginwire"
)

// Host is a small in-process stand-in for the capgate host, for plugins
// that work with each other through it: it serves each plugin the host
// services over the real broker, keeps every published event on one
// in-memory bus (retained forever, cursors from 1), and forwards the
// catalogue calls (Documents, Record) to the plugin that provides the
// entity type. Add the plugins, then Start them, as the host does.
//
// It is not the gate and it validates no event: it exercises what plugins
// do with each other.
type Host struct {
	// MaxResults is handed to plugins added after it is set, as the
	// host's max_results; 0 leaves the SDK's default of 20.
	MaxResults int
	// LLMConnectionSlug is handed to plugins added after it is set, as the
	// host's llm_connection_slug.
	LLMConnectionSlug string
	// Refuse, when set, stands in for the gate on nested calls
	// (sdk.Call.Invoke): a non-empty step refuses the call with reason.
	// Unset, every nested call is admitted.
	Refuse func(p sdk.Principal, capability string) (step, reason string)

	t       testing.TB
	id      string
	mu      sync.Mutex
	events  []hostEvent
	wake    chan struct{} // closed and replaced when an event is added
	clients []*Client
	started bool
	// provider maps an entity type to its plugin, from Start on.
	provider map[string]*Client
	catalog  []*capgatev1.EntityType
	// capability maps a capability to its plugin, from Start on.
	capability map[string]*Client
	// calls holds the callers of the calls in progress, by call id.
	calls  map[string]sdk.Principal
	callID int
}

// beginCall records a call in progress by pr and returns its id.
func (h *Host) beginCall(pr sdk.Principal) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.callID++
	id := fmt.Sprintf("sdktest-%d", h.callID)
	if h.calls == nil {
		h.calls = map[string]sdk.Principal{}
	}
	h.calls[id] = pr
	return id
}

func (h *Host) endCall(id string) {
	h.mu.Lock()
	delete(h.calls, id)
	h.mu.Unlock()
}

type hostEvent struct {
	Event
	publisher string
	at        time.Time
}

// NewHost returns an empty host whose plugins stop when the test ends.
func NewHost(t testing.TB) *Host {
	return &Host{t: t, id: fmt.Sprintf("sdktest-%p", t), wake: make(chan struct{})}
}

// Add serves p, configures it with config (marshalled to JSON; nil means no
// config block) and dataDir ("" means a fresh one), and returns its client.
// The plugin is not started: call Start once every plugin is added.
func (h *Host) Add(p *sdk.Plugin, config any, dataDir string) (*Client, error) {
	h.t.Helper()
	if dataDir == "" {
		dataDir = h.t.TempDir()
	}
	srv := sdk.NewServer(p)
	conn, _ := plugin.TestPluginGRPCConn(h.t, false, map[string]plugin.Plugin{
		capgatev1.PluginName: &pluginwire.Plugin{Impl: srv},
	})
	c := &Client{host: h, name: p.Name()}
	// Closing the client asks the server to shut down, as the host does
	// when it stops a plugin (stopping the server again would race it);
	// then the plugin's OnClose functions run, as sdk.Serve runs them.
	c.stop = func() error {
		_ = conn.Close()
		if cl, ok := srv.(interface{ Close() error }); ok {
			return cl.Close()
		}
		return nil
	}
	h.t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			h.t.Errorf("sdktest: closing plugin %s: %v", p.Name(), err)
		}
	})
	raw, err := conn.Dispense(capgatev1.PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense: %w", err)
	}
	wc := raw.(*pluginwire.Client)
	c.rpc = wc.PluginServiceClient

	// Serve the host's services on the broker, as the host does.
	hostID := wc.Broker.NextId()
	go wc.Broker.AcceptAndServe(hostID, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(opts...)
		capgatev1.RegisterHostServiceServer(s, &hostService{h: h, plugin: p.Name()})
		return s
	})

	cfg := []byte("{}")
	if config != nil {
		if cfg, err = json.Marshal(config); err != nil {
			return nil, fmt.Errorf("marshal config: %w", err)
		}
	}
	_, err = wc.Configure(context.Background(), &capgatev1.ConfigureRequest{
		ConfigJson: cfg, DataDir: dataDir, HostBrokerId: hostID, HostVersion: "sdktest",
		MaxResults: uint32(max(h.MaxResults, 0)), LlmConnectionSlug: h.LLMConnectionSlug,
	})
	if err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	h.mu.Lock()
	h.clients = append(h.clients, c)
	h.mu.Unlock()
	return c, nil
}

// Start registers every added plugin's entity types (refusing one provided
// twice) and starts the plugins in the order they were added. rebuild is
// passed on, as `capgate search reindex` does.
func (h *Host) Start(ctx context.Context, rebuild bool) error {
	h.mu.Lock()
	if h.started {
		h.mu.Unlock()
		return fmt.Errorf("sdktest: host already started")
	}
	clients := slices.Clone(h.clients)
	h.mu.Unlock()
	provider := map[string]*Client{}
	capability := map[string]*Client{}
	var catalog []*capgatev1.EntityType
	for _, c := range clients {
		d, err := c.Describe(ctx)
		if err != nil {
			return fmt.Errorf("describe %s: %w", c.name, err)
		}
		for _, cp := range d.Capabilities {
			capability[cp.Name] = c
		}
		for _, e := range d.Entities {
			if other, dup := provider[e.Name]; dup {
				return fmt.Errorf("entity type %q provided by %s and %s", e.Name, other.name, c.name)
			}
			provider[e.Name] = c
			catalog = append(catalog, &capgatev1.EntityType{
				Name: e.Name, Description: e.Description, Version: e.Version, Provider: c.name,
			})
		}
	}
	sort.Slice(catalog, func(i, j int) bool { return catalog[i].Name < catalog[j].Name })
	h.mu.Lock()
	h.provider, h.catalog, h.capability, h.started = provider, catalog, capability, true
	h.mu.Unlock()
	for _, c := range clients {
		if _, err := c.rpc.Start(ctx, &capgatev1.StartRequest{Rebuild: rebuild}); err != nil {
			return fmt.Errorf("start %s: %w", c.name, err)
		}
	}
	return nil
}

// Publish puts an event on the host's bus as if a plugin named publisher had
// published it, and returns its cursor.
func (h *Host) Publish(publisher string, ev Event) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev.Cursor = uint64(len(h.events)) + 1
	h.events = append(h.events, hostEvent{Event: ev, publisher: publisher, at: time.Now().UTC()})
	close(h.wake)
	h.wake = make(chan struct{})
	return ev.Cursor
}

// Events returns every event on the bus, oldest first.
func (h *Host) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Event, len(h.events))
	for i, e := range h.events {
		out[i] = e.Event
	}
	return out
}

// hostService is the host's side of the broker, for one plugin.
type hostService struct {
	capgatev1.UnimplementedHostServiceServer
	h      *Host
	plugin string
}

func (s *hostService) Ping(context.Context, *capgatev1.PingRequest) (*capgatev1.PingResponse, error) {
	return &capgatev1.PingResponse{}, nil
}

func (s *hostService) Publish(_ context.Context, req *capgatev1.PublishRequest) (*capgatev1.PublishResponse, error) {
	ev := Event{Type: req.Type, Entity: req.Entity, ID: req.Id, UserID: req.UserId}
	if len(req.Data) > 0 {
		ev.Data = json.RawMessage(slices.Clone(req.Data))
	}
	return &capgatev1.PublishResponse{Cursor: s.h.Publish(s.plugin, ev)}, nil
}

func (s *hostService) started() error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if !s.h.started {
		return status.Error(codes.FailedPrecondition, "the catalogue is complete only once the host starts the plugins")
	}
	return nil
}

func (s *hostService) Catalogue(context.Context, *capgatev1.CatalogueRequest) (*capgatev1.CatalogueResponse, error) {
	if err := s.started(); err != nil {
		return nil, err
	}
	return &capgatev1.CatalogueResponse{Entities: s.h.catalog}, nil
}

func (s *hostService) providerOf(entity string) (*Client, error) {
	if err := s.started(); err != nil {
		return nil, err
	}
	c, ok := s.h.provider[entity]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no plugin provides entity type %q", entity)
	}
	return c, nil
}

func (s *hostService) Documents(ctx context.Context, req *capgatev1.DocumentsRequest) (*capgatev1.DocumentsResponse, error) {
	c, err := s.providerOf(req.Entity)
	if err != nil {
		return nil, err
	}
	return c.rpc.Documents(ctx, req)
}

func (s *hostService) Record(ctx context.Context, req *capgatev1.RecordRequest) (*capgatev1.RecordResponse, error) {
	c, err := s.providerOf(req.Entity)
	if err != nil {
		return nil, err
	}
	return c.rpc.Record(ctx, req)
}

func (s *hostService) Bus(context.Context, *capgatev1.BusRequest) (*capgatev1.BusResponse, error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	resp := &capgatev1.BusResponse{Id: s.h.id, Last: uint64(len(s.h.events))}
	if len(s.h.events) > 0 {
		resp.Oldest = 1
	}
	return resp, nil
}

func (s *hostService) Subscribe(req *capgatev1.SubscribeRequest, stream grpc.ServerStreamingServer[capgatev1.BusEvent]) error {
	after := req.After
	for {
		s.h.mu.Lock()
		pending := slices.Clone(s.h.events[min(after, uint64(len(s.h.events))):])
		wake := s.h.wake
		s.h.mu.Unlock()
		for _, e := range pending {
			after = e.Cursor
			if len(req.Types) > 0 && !slices.Contains(req.Types, e.Type) {
				continue
			}
			if err := stream.Send(&capgatev1.BusEvent{
				Cursor: e.Cursor, Type: e.Type, Entity: e.Entity, Id: e.ID, UserId: e.UserID,
				AtUnixNano: e.at.UnixNano(), Data: e.Data,
			}); err != nil {
				return err
			}
		}
		select {
		case <-wake:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// Stop stops the plugin as the host does: the connection closes and its
// OnClose functions run. Use it to start the plugin again over the same
// data directory; it runs by itself when the test ends, and more than once
// is harmless.
func (c *Client) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

// Invoke runs a nested call as the caller of the call in progress, after
// Refuse (the stand-in gate) has had its say.
func (s *hostService) Invoke(ctx context.Context, req *capgatev1.HostServiceInvokeRequest) (*capgatev1.HostServiceInvokeResponse, error) {
	s.h.mu.Lock()
	pr, ok := s.h.calls[req.CallId]
	target := s.h.capability[req.Capability]
	refuse := s.h.Refuse
	s.h.mu.Unlock()
	switch {
	case !ok:
		return nil, status.Errorf(codes.PermissionDenied, "call_id %q is not a call in progress", req.CallId)
	case target == nil:
		return nil, status.Errorf(codes.NotFound, "no capability %q", req.Capability)
	}
	if refuse != nil {
		if step, reason := refuse(pr, req.Capability); step != "" {
			return &capgatev1.HostServiceInvokeResponse{Refusal: &capgatev1.Refusal{Step: step, Reason: reason}}, nil
		}
	}
	raw, te, err := target.Invoke(ctx, req.Capability, pr, json.RawMessage(req.Arguments))
	switch {
	case err != nil:
		return nil, err
	case te != nil:
		return &capgatev1.HostServiceInvokeResponse{Error: &capgatev1.ToolError{Code: te.Code, Message: te.Message}}, nil
	}
	return &capgatev1.HostServiceInvokeResponse{Result: raw}, nil
}

// Documents asks the plugin for a page of the documents of entity it
// provides, as the host does when an index syncs.
func (c *Client) Documents(ctx context.Context, entity, after string, limit int) (*capgatev1.DocumentsResponse, error) {
	return c.rpc.Documents(ctx, &capgatev1.DocumentsRequest{Entity: entity, After: after, Limit: uint32(max(limit, 0))})
}

// DocumentsByID asks the plugin for the documents of entity with these ids.
func (c *Client) DocumentsByID(ctx context.Context, entity string, ids ...string) (*capgatev1.DocumentsResponse, error) {
	return c.rpc.Documents(ctx, &capgatev1.DocumentsRequest{Entity: entity, Ids: ids})
}

// Record asks the plugin for the full record of entity id. A failure the
// plugin reports for the agent (NotFound) is a *ToolError.
func (c *Client) Record(ctx context.Context, entity, id string) (json.RawMessage, *ToolError, error) {
	resp, err := c.rpc.Record(ctx, &capgatev1.RecordRequest{Entity: entity, Id: id})
	if err != nil {
		return nil, nil, err
	}
	if e := resp.GetError(); e != nil {
		return nil, &ToolError{Code: e.Code, Message: e.Message}, nil
	}
	return resp.Record, nil, nil
}
