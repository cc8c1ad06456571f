package index_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/capgate/capgate/plugins/search/internal/index"
)

func Example() {
	dir, err := os.MkdirTemp("", "capgate-index-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	x, err := index.Open(filepath.Join(dir, "search"))
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()

	ctx := context.Background()
	err = x.Upsert(ctx,
		index.Document{Entity: "booking.resource", ID: "1", Title: "Aurora conference room",
			Body: "Conference room with a projector.", Fields: map[string]string{"location": "north wing"}},
		index.Document{Entity: "booking.resource", ID: "2", Title: "Quiet desk",
			Body: "Hot desk by the window."},
		index.Document{Entity: "subscription.plan", ID: "basic", Title: "Basic plan",
			Body: "Monthly plan with two room bookings."},
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := x.SetVersion("booking.resource", "v7"); err != nil {
		log.Fatal(err)
	}

	for _, q := range []index.Query{
		{Text: "aurroa"},                            // one typo
		{Text: "conf"},                              // prefix
		{Text: `"room with a projector"`},           // phrase
		{Text: "room", Entity: "subscription.plan"}, // entity filter
	} {
		hits, err := x.Search(ctx, q)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s/%s %q\n", q.Text, hits[0].Entity, hits[0].ID, hits[0].Snippet)
	}
	v, _ := x.Version("booking.resource")
	fmt.Println("version:", v)
	// Output:
	// aurroa: booking.resource/1 "Conference room with a projector."
	// conf: booking.resource/1 "Conference room with a projector."
	// "room with a projector": booking.resource/1 "Conference room with a projector."
	// room: subscription.plan/basic "Monthly plan with two room bookings."
	// version: v7
}
