package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// The host's services that reach other plugins (the catalogue, documents,
// records) answer from OnStart on: before it, the other plugins may not be
// running yet.

// EntityInfo is a catalogue entity type as the host registered it.
type EntityInfo struct {
	Name        string
	Description string
	// Version is the provider's document version (see Entity.Version).
	Version string
	// Provider is the plugin providing it.
	Provider string
}

// Catalogue lists every entity type the plugins provide, sorted by name.
func (e Env) Catalogue(ctx context.Context) ([]EntityInfo, error) {
	if e.host == nil {
		return nil, ErrNoHost
	}
	resp, err := capgatev1.NewHostServiceClient(e.host).Catalogue(ctx, &capgatev1.CatalogueRequest{})
	if err != nil {
		return nil, hostError("catalogue", err)
	}
	out := make([]EntityInfo, len(resp.Entities))
	for i, t := range resp.Entities {
		out[i] = EntityInfo{Name: t.Name, Description: t.Description, Version: t.Version, Provider: t.Provider}
	}
	return out, nil
}

// Documents returns up to limit documents of entity whose id sorts after
// after ("" starts at the first), sorted by id, and whether more follow.
// limit 0 means the contract's default page of 500; more than 1000 is read
// as 1000.
func (e Env) Documents(ctx context.Context, entity, after string, limit int) (docs []Document, more bool, err error) {
	resp, err := e.documents(ctx, &capgatev1.DocumentsRequest{Entity: entity, After: after, Limit: uint32(max(limit, 0))})
	if err != nil {
		return nil, false, err
	}
	return fromWire(resp.Documents), resp.More, nil
}

// DocumentsByID returns the documents of entity with these ids; ids that do
// not exist (any more) are left out.
func (e Env) DocumentsByID(ctx context.Context, entity string, ids []string) ([]Document, error) {
	if e.host == nil {
		return nil, ErrNoHost
	}
	if len(ids) == 0 {
		return nil, nil
	}
	resp, err := e.documents(ctx, &capgatev1.DocumentsRequest{Entity: entity, Ids: ids})
	if err != nil {
		return nil, err
	}
	return fromWire(resp.Documents), nil
}

func (e Env) documents(ctx context.Context, req *capgatev1.DocumentsRequest) (*capgatev1.DocumentsResponse, error) {
	if e.host == nil {
		return nil, ErrNoHost
	}
	resp, err := capgatev1.NewHostServiceClient(e.host).Documents(ctx, req)
	if err != nil {
		return nil, hostError("documents of "+req.Entity, err)
	}
	return resp, nil
}

func fromWire(ds []*capgatev1.Document) []Document {
	out := make([]Document, len(ds))
	for i, d := range ds {
		out[i] = Document{ID: d.Id, Title: d.Title, Body: d.Body, Fields: d.Fields}
	}
	return out
}

// Record returns the full current record of entity id from its provider, as
// a JSON object. An id the provider does not know is a NotFound error
// (IsNotFound), which a handler may return to its caller as is.
func (e Env) Record(ctx context.Context, entity, id string) (json.RawMessage, error) {
	if e.host == nil {
		return nil, ErrNoHost
	}
	resp, err := capgatev1.NewHostServiceClient(e.host).Record(ctx, &capgatev1.RecordRequest{Entity: entity, Id: id})
	if err != nil {
		return nil, hostError("record of "+entity, err)
	}
	if te := resp.GetError(); te != nil {
		return nil, fromWireError(te)
	}
	return resp.Record, nil
}

// BusState describes the host's event bus.
type BusState struct {
	// ID identifies the bus: cursors are comparable only under one ID. An
	// in-process bus gets a new ID each time the host starts.
	ID string
	// Oldest is the oldest retained cursor (0: nothing retained); Last the
	// newest cursor (0: nothing published yet).
	Oldest, Last uint64
}

// Bus describes the host's event bus, so a subscriber can tell whether a
// cursor it kept is still meaningful.
func (e Env) Bus(ctx context.Context) (BusState, error) {
	if e.host == nil {
		return BusState{}, ErrNoHost
	}
	resp, err := capgatev1.NewHostServiceClient(e.host).Bus(ctx, &capgatev1.BusRequest{})
	if err != nil {
		return BusState{}, hostError("bus", err)
	}
	return BusState{ID: resp.Id, Oldest: resp.Oldest, Last: resp.Last}, nil
}

// ReceivedEvent is an event delivered to a subscriber.
type ReceivedEvent struct {
	Cursor uint64
	Type   string
	Entity string
	ID     string
	UserID string
	At     time.Time
	Data   json.RawMessage
}

// ErrEventsLost is returned by Subscribe when events the subscriber has not
// seen are no longer retained by the bus: rebuild what was derived from
// them, then subscribe again from the bus's current Last.
var ErrEventsLost = errors.New("events after the cursor are no longer retained")

// Subscribe delivers the bus's events after cursor after, in order, to
// handle, until ctx ends (it then returns ctx's error) or handle fails (it
// returns that error). types, when set, restricts delivery to those event
// types. A subscriber that fell behind the bus's retained window gets an
// error matching ErrEventsLost. Keep the cursor of the last event handled:
// passing it to the next Subscribe resumes without loss or repetition.
func (e Env) Subscribe(ctx context.Context, after uint64, types []string, handle func(context.Context, ReceivedEvent) error) error {
	if e.host == nil {
		return ErrNoHost
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := capgatev1.NewHostServiceClient(e.host).Subscribe(ctx, &capgatev1.SubscribeRequest{After: after, Types: types})
	if err != nil {
		return subscribeError(ctx, err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("subscribe: the host ended the subscription")
			}
			return subscribeError(ctx, err)
		}
		re := ReceivedEvent{
			Cursor: ev.Cursor, Type: ev.Type, Entity: ev.Entity, ID: ev.Id, UserID: ev.UserId,
			At: time.Unix(0, ev.AtUnixNano).UTC(),
		}
		if len(ev.Data) > 0 {
			re.Data = ev.Data
		}
		if err := handle(ctx, re); err != nil {
			return err
		}
	}
}

func subscribeError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch s, _ := status.FromError(err); s.Code() {
	case codes.OutOfRange, codes.DataLoss:
		return fmt.Errorf("subscribe: %w: %s", ErrEventsLost, s.Message())
	}
	return hostError("subscribe", err)
}

// hostError names the host service that failed, with the gRPC status's
// code and message rather than its Go-syntax form.
func hostError(what string, err error) error {
	if s, ok := status.FromError(err); ok {
		return fmt.Errorf("host %s: %s: %s", what, s.Code(), s.Message())
	}
	return fmt.Errorf("host %s: %w", what, err)
}
