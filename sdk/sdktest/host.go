package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
)

// Host is an in-process capgate host for plugins under test: it serves
// each plugin the host services over the real broker, keeps every
// published event on one in-memory bus (retained forever, cursors from
// 1), forwards the catalogue calls (Documents, Record) to the plugin that
// provides the entity type, and runs every call through the real gate (see
// the package doc). Add the plugins, then Start them, as the host does.
// It validates no event.
type Host struct {
	// MaxResults is handed to plugins added after it is set, as the
	// host's max_results; 0 leaves the SDK's default of 20.
	MaxResults int
	// Roles maps a role to the permissions it holds, as the host config's
	// roles do ("*" holds every permission, "booking.*" every one starting
	// with "booking."). Nil, every role holds every permission. Set it
	// before Start.
	Roles map[string][]string
	// DisabledPacks are packs the operator turned off; every other pack of
	// the added plugins is on. Set it before Start.
	DisabledPacks []string

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
	// The gate, from Start on: roles are the ones it knows (grown by
	// gateFor while Roles is nil).
	reg       *registry.Registry
	policy    dispatch.Policy
	providers map[string]dispatch.Provider
	gate      *dispatch.Dispatcher
	rounds    sealer // seals the rounds of calls that ask their client
	// calls holds the callers of the calls in progress, by call id.
	calls  map[string]inflight
	callID int
}

// MaxNestedDepth bounds how deep plugins may call capabilities through
// the host while serving a call, as the host bounds it.
const MaxNestedDepth = pluginwire.MaxNestedDepth

type inflight struct {
	principal dispatch.Principal
	depth     int
}

type depthKey struct{}

// beginCall records a call in progress and returns its id.
func (h *Host) beginCall(pr dispatch.Principal, depth int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.callID++
	id := fmt.Sprintf("sdktest-%d", h.callID)
	if h.calls == nil {
		h.calls = map[string]inflight{}
	}
	h.calls[id] = inflight{principal: pr, depth: depth}
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
	srv := sdkserver.NewServer(p)
	conn, _ := plugin.TestPluginGRPCConn(h.t, false, pluginwire.PluginSet(srv))
	c := &Client{host: h, name: p.Name()}
	// Closing the client asks the server to shut down, as the host does
	// when it stops a plugin (stopping the server again would race it);
	// then the plugin's OnClose functions run, as sdk.Serve runs them.
	c.stop = func() error {
		if c.calls != nil {
			c.calls.Close()
		}
		_ = conn.Close()
		return srv.Close()
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
		MaxResults: uint32(max(h.MaxResults, 0)), MaxResultBytes: maxResultBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("configure: %s", pluginwire.StatusMessage(err))
	}
	if c.calls, err = pluginwire.OpenCalls(context.Background(), c.rpc); err != nil {
		return nil, fmt.Errorf("open call stream: %s", pluginwire.StatusMessage(err))
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
	providers := map[string]dispatch.Provider{}
	var catalog []*capgatev1.EntityType
	var caps []registry.Capability
	var prompts []registry.Prompt
	var resources []registry.Resource
	var templates []registry.ResourceTemplate
	packs := map[string]bool{}
	for _, c := range clients {
		d, err := c.Describe(ctx)
		if err != nil {
			return fmt.Errorf("describe %s: %w", c.name, err)
		}
		for _, cp := range d.Capabilities {
			rc, err := pluginwire.Capability(cp, c.name)
			if err != nil {
				return fmt.Errorf("plugin %s: %w", c.name, err)
			}
			caps = append(caps, rc)
			packs[rc.Pack] = true
		}
		for _, r := range d.Resources {
			rr := pluginwire.Resource(r, c.name)
			resources = append(resources, rr)
			packs[rr.Pack] = true
		}
		for _, r := range d.ResourceTemplates {
			rt := pluginwire.ResourceTemplate(r, c.name)
			templates = append(templates, rt)
			packs[rt.Pack] = true
		}
		for _, pp := range d.Prompts {
			rp := pluginwire.Prompt(pp, c.name)
			prompts = append(prompts, rp)
			packs[rp.Pack] = true
		}
		providers[c.name] = gateProvider{c}
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
	reg := registry.New(slices.Collect(maps.Keys(packs)))
	for _, rc := range caps {
		if err := reg.Add(rc); err != nil {
			return fmt.Errorf("plugin %s declares an invalid capability: %w", rc.Plugin, err)
		}
	}
	for _, rp := range prompts {
		if err := reg.AddPrompt(rp); err != nil {
			return fmt.Errorf("plugin %s declares an invalid prompt: %w", rp.Plugin, err)
		}
	}
	var errs []error
	for _, r := range resources {
		if err := reg.AddResource(r); err != nil {
			errs = append(errs, fmt.Errorf("plugin %s declares an invalid %w", r.Plugin, err))
		}
	}
	for _, t := range templates {
		if err := reg.AddResourceTemplate(t); err != nil {
			errs = append(errs, fmt.Errorf("plugin %s declares an invalid %w", t.Plugin, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, off := range h.DisabledPacks {
		packs[off] = false
	}
	policy := dispatch.Policy{Packs: packs, Roles: maps.Clone(h.Roles)}
	if policy.Roles == nil {
		policy.Roles = map[string][]string{}
	}
	gate, err := dispatch.New(reg, policy, providers)
	if err != nil {
		return fmt.Errorf("sdktest: %w", err)
	}
	h.mu.Lock()
	h.provider, h.catalog, h.started = provider, catalog, true
	gate.UseConfirmer(&h.rounds)
	h.reg, h.policy, h.providers, h.gate = reg, policy, providers, gate
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

// Invoke runs a nested call through the gate as the caller of the call in
// progress, as the host does.
func (s *hostService) Invoke(ctx context.Context, req *capgatev1.HostServiceInvokeRequest) (*capgatev1.HostServiceInvokeResponse, error) {
	s.h.mu.Lock()
	parent, ok := s.h.calls[req.CallId]
	s.h.mu.Unlock()
	switch {
	case !ok:
		return nil, status.Errorf(codes.PermissionDenied, "call_id %q is not a call plugin %q is serving", req.CallId, s.plugin)
	}
	if err := pluginwire.NestedTooDeep(parent.depth); err != nil {
		return nil, err
	}
	res, err := s.h.invokeGate(ctx, parent.principal, req.Capability, req.Arguments, parent.depth+1)
	if err != nil && !isGateOutcome(err) {
		s.h.t.Logf("sdktest: nested call of %s by plugin %s failed: %v", req.Capability, s.plugin, err)
	}
	return pluginwire.NestedResponse(ctx, req.Capability, res, err)
}

// Documents asks the plugin for a page of the documents of entity it
// provides, as the host does when an index syncs: up to limit documents
// whose id sorts after after (0 means the contract's 500), and whether
// more follow.
func (c *Client) Documents(ctx context.Context, entity, after string, limit int) ([]sdk.Document, bool, error) {
	resp, err := c.rpc.Documents(ctx, &capgatev1.DocumentsRequest{Entity: entity, After: after, Limit: uint32(max(limit, 0))})
	if err != nil {
		return nil, false, err
	}
	return documents(resp), resp.More, nil
}

// DocumentsByID asks the plugin for the documents of entity with these ids.
func (c *Client) DocumentsByID(ctx context.Context, entity string, ids ...string) ([]sdk.Document, error) {
	resp, err := c.rpc.Documents(ctx, &capgatev1.DocumentsRequest{Entity: entity, Ids: ids})
	if err != nil {
		return nil, err
	}
	return documents(resp), nil
}

func documents(resp *capgatev1.DocumentsResponse) []sdk.Document {
	out := make([]sdk.Document, len(resp.Documents))
	for i, d := range resp.Documents {
		out[i] = sdk.Document{ID: d.Id, Title: d.Title, Body: d.Body, Fields: d.Fields}
	}
	return out
}

// Record asks the plugin for the full record of entity id. A failure the
// plugin reports for the agent (NotFound) is an *sdk.Error.
func (c *Client) Record(ctx context.Context, entity, id string) (json.RawMessage, error) {
	resp, err := c.rpc.Record(ctx, &capgatev1.RecordRequest{Entity: entity, Id: id})
	if err != nil {
		return nil, err
	}
	if e := resp.GetError(); e != nil {
		return nil, fromGate(entity, pluginwire.ToolError(e))
	}
	return resp.Record, nil
}
