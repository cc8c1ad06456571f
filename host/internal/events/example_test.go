package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/capgate/capgate/host/internal/events"
)

// A plugin publishes what happened; the search index subscribes under a
// durable name; events.poll reads the retained window with a cursor.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "capgate-events-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// The host's default: a JetStream store of its own in <data_dir>/events.
	bus, err := events.OpenEmbedded(ctx, events.EmbeddedConfig{Dir: dir, BufferSize: 2, Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer bus.Close()

	indexed := make(chan events.Event)
	sub, err := bus.Subscribe(ctx, "search-index", 0, func(_ context.Context, ev events.Event) error {
		indexed <- ev
		return nil // an error would bring the same event back later
	})
	if err != nil {
		panic(err)
	}
	defer sub.Close()

	for _, ev := range []events.Event{
		{Type: "catalogue.upsert", Entity: "booking.resource", ID: "room-1", Data: json.RawMessage(`{"title":"Room 1"}`)},
		{Type: "booking.created", Entity: "booking", ID: "bk_1", UserID: "alice"},
		{Type: "booking.cancelled", Entity: "booking", ID: "bk_1", UserID: "alice"},
	} {
		cursor, err := bus.Publish(ctx, ev)
		if err != nil {
			panic(err)
		}
		got := <-indexed
		fmt.Println("delivered", got.Cursor, got.Type, got.ID, "published as", cursor)
	}

	// The buffer keeps the last two events.
	evs, oldest, err := bus.Since(ctx, 1, 10)
	fmt.Println("since 1:", len(evs), "events, oldest", oldest, err)
	_, _, err = bus.Since(ctx, 0, 10)
	var tooOld *events.CursorTooOldError
	fmt.Println("since 0:", errors.As(err, &tooOld), tooOld.Oldest)

	_, err = bus.Publish(ctx, events.Event{Type: "created", Entity: "booking", ID: "x"})
	fmt.Println(errors.Is(err, events.ErrInvalidEvent))
	// Output:
	// delivered 1 catalogue.upsert room-1 published as 1
	// delivered 2 booking.created bk_1 published as 2
	// delivered 3 booking.cancelled bk_1 published as 3
	// since 1: 2 events, oldest 2 <nil>
	// since 0: true 2
	// true
}
