package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Event is something that happened in the plugin, for the host's event bus:
// other plugins subscribe to it and agents read it through the events pack.
type Event struct {
	// Type is a dotted lower-case name such as "booking.cancelled".
	Type string
	// Entity is the kind of thing the event is about, e.g. "booking" or
	// "booking.resource".
	Entity string
	// ID identifies the entity within its kind.
	ID string
	// UserID is the user the entity belongs to. Leave it empty only for
	// public catalogue events: every reader of the events pack sees those,
	// while an event with a UserID is shown to that user (and admins) alone.
	UserID string
	// Data is optional detail, marshalled to a JSON object.
	Data any
}

// ErrNoHost is returned by the Env methods that reach the host (Publish,
// Catalogue, Documents, Record, Bus, Subscribe) in a plugin that no capgate host
// configured, so there is nothing to reach.
var ErrNoHost = errors.New("no capgate host: the plugin was not started by one")

// Publish puts ev on the host's event bus and returns its cursor. It may be
// called from OnConfigure and, with the Env kept, from any handler. The host
// refuses a malformed event (an error naming the reason); publishing is not
// transactional with the plugin's own storage, so call it after a commit.
// A host on an operator's NATS server does not wait on it for more than
// about a second: an event the server has not acknowledged by then is kept
// on the host's disk and published in order once it is back, and Publish
// returns cursor 0 and no error.
func (e Env) Publish(ctx context.Context, ev Event) (uint64, error) {
	if e.host == nil {
		return 0, ErrNoHost
	}
	var data []byte
	if ev.Data != nil {
		var err error
		if data, err = json.Marshal(ev.Data); err != nil {
			return 0, fmt.Errorf("publish %s: encode data: %w", ev.Type, err)
		}
	}
	resp, err := capgatev1.NewHostServiceClient(e.host).Publish(ctx, &capgatev1.PublishRequest{
		Type: ev.Type, Entity: ev.Entity, Id: ev.ID, UserId: ev.UserID, Data: data,
	})
	if err != nil {
		if s, ok := status.FromError(err); ok {
			return 0, fmt.Errorf("publish %s: %s: %s", ev.Type, s.Code(), s.Message())
		}
		return 0, fmt.Errorf("publish %s: %w", ev.Type, err)
	}
	return resp.Cursor, nil
}

// hostConn is the client side of the host's services.
type hostConn = grpc.ClientConnInterface
