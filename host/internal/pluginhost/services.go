package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/internal/pluginwire"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// services is the state behind every plugin's HostService: the bus from the
// first plugin on, the catalogue once Host.Start has run.
type services struct {
	bus  events.Bus // nil: the bus services answer Unavailable
	log  *slog.Logger
	cat  atomic.Pointer[catalogState]
	gate gateRef // for nested calls; set by SetGate
}

// catalogState is the catalogue as plugins see it through the host.
type catalogState struct {
	entities []*capgatev1.EntityType // sorted by name, provider set
	provider map[string]*Plugin
}

// hostService is what one plugin may call back.
type hostService struct {
	capgatev1.UnimplementedHostServiceServer
	plugin string  // the plugin's name, for the log
	self   *Plugin // the plugin served, whose calls in progress it may act for
	svc    *services
}

func (h hostService) Ping(context.Context, *capgatev1.PingRequest) (*capgatev1.PingResponse, error) {
	return &capgatev1.PingResponse{}, nil
}

// Publish validates the plugin's event and puts it on the bus.
func (h hostService) Publish(ctx context.Context, req *capgatev1.PublishRequest) (*capgatev1.PublishResponse, error) {
	bus := h.svc.bus
	if bus == nil {
		return nil, status.Error(codes.Unavailable, "this host has no event bus")
	}
	ev := events.Event{Type: req.Type, Entity: req.Entity, ID: req.Id, UserID: req.UserId}
	if len(req.Data) > 0 {
		ev.Data = json.RawMessage(req.Data)
	}
	if err := ev.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cursor, err := bus.Publish(ctx, ev)
	switch {
	case errors.Is(err, events.ErrInvalidEvent):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		h.svc.log.Warn("publishing a plugin's event failed", "plugin", h.plugin, "type", ev.Type, "err", err)
		return nil, status.Errorf(codes.Unavailable, "event bus: %v", err)
	}
	return &capgatev1.PublishResponse{Cursor: cursor}, nil
}

func (h hostService) catalog() (*catalogState, error) {
	c := h.svc.cat.Load()
	if c == nil {
		return nil, status.Error(codes.FailedPrecondition,
			"the catalogue is complete only once every plugin has started: call it from OnStart on, not from OnConfigure")
	}
	return c, nil
}

// Catalogue lists the provided entity types.
func (h hostService) Catalogue(context.Context, *capgatev1.CatalogueRequest) (*capgatev1.CatalogueResponse, error) {
	c, err := h.catalog()
	if err != nil {
		return nil, err
	}
	return &capgatev1.CatalogueResponse{Entities: c.entities}, nil
}

func (h hostService) providerOf(entity string) (*Plugin, error) {
	c, err := h.catalog()
	if err != nil {
		return nil, err
	}
	p, ok := c.provider[entity]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no plugin provides entity type %q", entity)
	}
	return p, nil
}

// Documents forwards to the entity's provider.
func (h hostService) Documents(ctx context.Context, req *capgatev1.DocumentsRequest) (*capgatev1.DocumentsResponse, error) {
	p, err := h.providerOf(req.Entity)
	if err != nil {
		return nil, err
	}
	inst, err := p.serving()
	if err != nil {
		return nil, err
	}
	resp, err := inst.rpc.Documents(ctx, req)
	if err != nil {
		return nil, providerError(p, "documents of "+req.Entity, err)
	}
	return resp, nil
}

// Record forwards to the entity's provider.
func (h hostService) Record(ctx context.Context, req *capgatev1.RecordRequest) (*capgatev1.RecordResponse, error) {
	p, err := h.providerOf(req.Entity)
	if err != nil {
		return nil, err
	}
	inst, err := p.serving()
	if err != nil {
		return nil, err
	}
	resp, err := inst.rpc.Record(ctx, req)
	if err != nil {
		return nil, providerError(p, "record of "+req.Entity, err)
	}
	return resp, nil
}

// serving is the provider's process for a forwarded call, or Unavailable
// while none serves: the calling plugin retries later.
func (p *Plugin) serving() (*instance, error) {
	if err := p.unavailable(); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return p.cur.Load(), nil
}

// providerError keeps the provider's status code, so a caller tells a
// missing provider from a failing one, and names the provider.
func providerError(p *Plugin, what string, err error) error {
	s, _ := status.FromError(err)
	return status.Errorf(s.Code(), "plugin %q: %s: %s", p.spec.Name, what, s.Message())
}

// Bus describes the event bus.
func (h hostService) Bus(ctx context.Context, _ *capgatev1.BusRequest) (*capgatev1.BusResponse, error) {
	if h.svc.bus == nil {
		return nil, status.Error(codes.Unavailable, "this host has no event bus")
	}
	st, err := h.svc.bus.State(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "event bus: %v", err)
	}
	return &capgatev1.BusResponse{Id: st.ID, Oldest: st.Oldest, Last: st.Last}, nil
}

// Subscribe streams the bus's events after req.After. Each stream follows
// the bus from exactly the cursor the plugin kept, which is the plugin's to
// persist, and leaves nothing on the bus when it ends. A gap in the cursors
// means events were dropped before delivery, and ends the stream.
func (h hostService) Subscribe(req *capgatev1.SubscribeRequest, stream grpc.ServerStreamingServer[capgatev1.BusEvent]) error {
	bus := h.svc.bus
	if bus == nil {
		return status.Error(codes.Unavailable, "this host has no event bus")
	}
	ctx := stream.Context()
	st, err := bus.State(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "event bus: %v", err)
	}
	switch {
	case req.After > st.Last:
		return status.Errorf(codes.OutOfRange, "cursor %d is beyond the bus's newest %d: it was kept under another bus (%s)", req.After, st.Last, st.ID)
	case st.Oldest > 0 && req.After+1 < st.Oldest:
		return status.Errorf(codes.OutOfRange, "events after cursor %d are no longer retained: the oldest is %d", req.After, st.Oldest)
	}

	var (
		prev   = req.After
		ended  atomic.Bool
		failed = make(chan error, 1)
	)
	end := func(err error) {
		if ended.CompareAndSwap(false, true) {
			failed <- err
		}
	}
	handle := func(_ context.Context, ev events.Event) error {
		if ended.Load() {
			return nil
		}
		// From cursor 0 the subscription starts wherever retention begins.
		if prev != 0 && ev.Cursor != prev+1 {
			end(status.Errorf(codes.DataLoss, "events %d to %d were dropped before delivery: the subscriber fell behind the retained window", prev+1, ev.Cursor-1))
			return nil
		}
		prev = ev.Cursor
		if len(req.Types) > 0 && !slices.Contains(req.Types, ev.Type) {
			return nil
		}
		err := stream.Send(&capgatev1.BusEvent{
			Cursor: ev.Cursor, Type: ev.Type, Entity: ev.Entity, Id: ev.ID, UserId: ev.UserID,
			AtUnixNano: ev.At.UnixNano(), Data: ev.Data,
		})
		if err != nil {
			end(err)
		}
		return nil
	}
	sub, err := bus.Follow(ctx, req.After, handle)
	if err != nil {
		return status.Errorf(codes.Unavailable, "event bus: %v", err)
	}
	defer sub.Close()
	h.svc.log.Debug("plugin subscribed to events", "plugin", h.plugin, "subscriber", sub.Name(), "after", req.After)
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// Start tells every plugin, in start order, that all plugins are
// configured and the catalogue is complete; from then on the host services
// that reach other plugins answer. rebuild asks plugins to rebuild what
// they derived from others (an index). An error names the plugin.
func (h *Host) Start(ctx context.Context, rebuild bool) error {
	state := &catalogState{provider: map[string]*Plugin{}}
	for _, p := range h.plugins {
		for _, e := range p.describe.Entities {
			if other, dup := state.provider[e.Name]; dup {
				// RegisterEntities refuses this first; kept as a guard.
				return fmt.Errorf("entity type %q is provided by plugins %q and %q", e.Name, other.spec.Name, p.spec.Name)
			}
			state.provider[e.Name] = p
			state.entities = append(state.entities, &capgatev1.EntityType{
				Name: e.Name, Description: e.Description, Version: e.Version, Provider: p.spec.Name,
			})
		}
	}
	sort.Slice(state.entities, func(i, j int) bool { return state.entities[i].Name < state.entities[j].Name })
	h.services.cat.Store(state)
	for _, p := range h.plugins {
		inst, err := p.serving()
		if err == nil {
			_, err = inst.rpc.Start(ctx, &capgatev1.StartRequest{Rebuild: rebuild})
		}
		if err != nil {
			return fmt.Errorf("%s: plugin %q: start: %s", p.spec.where(), p.spec.Name, pluginwire.StatusMessage(err))
		}
		// A process restarted from here on is started as it comes up.
		p.started.Store(true)
	}
	return nil
}
