package booking_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type pingIn struct{}

type pingOut struct {
	OK bool `json:"ok"`
}

// BenchmarkGet compares booking.get (owner-guarded, one SQLite read)
// with a tool that does nothing, both through the gate and the call
// stream in one host, as `make bench` compares them behind HTTP.
func BenchmarkGet(b *testing.B) {
	noop := sdk.New("noop", "1")
	sdk.Add(noop, sdk.Tool[pingIn, pingOut]{Name: "noop.ping", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, pingIn) (pingOut, error) { return pingOut{OK: true}, nil }})
	h := sdktest.NewHost(b)
	c, err := h.Add(newPlugin(now), demo, "")
	if err != nil {
		b.Fatal(err)
	}
	n, err := h.Add(noop, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		b.Fatal(err)
	}
	list := sdktest.Call[booking.ListOut](b, c, "booking.list", alice, nil)
	if len(list.Bookings) == 0 {
		b.Fatal("no booking to get")
	}
	args, _ := json.Marshal(booking.IDIn{ID: list.Bookings[0].ID})
	for _, bc := range []struct {
		name, capability string
		c                *sdktest.Client
		args             json.RawMessage
	}{
		{"noop", "noop.ping", n, json.RawMessage(`{}`)},
		{"booking.get", "booking.get", c, args},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bc.c.Invoke(context.Background(), bc.capability, alice, bc.args); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
