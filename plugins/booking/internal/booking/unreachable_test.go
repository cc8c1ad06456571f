package booking_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sdktest"
)

// cutter forwards TCP connections to a server until cut, which closes
// them all and refuses new ones, as when the database drops off the
// network; mend listens again on the same port.
type cutter struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	c := &cutter{t: t, addr: "127.0.0.1:0", target: target}
	c.mend()
	c.addr = c.ln.Addr().String()
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) mend() {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		c.t.Fatalf("proxy: %v", err)
	}
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", c.target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// TestDatabaseAwayIsNamed: with its PostgreSQL cut off, the plugin's calls
// fail at once with an Unavailable error naming the booking database and
// saying nothing changed, without the database's address; once it is back
// the same calls succeed without a restart.
func TestDatabaseAwayIsNamed(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutter(t, u.Host)
	u.Host = proxy.addr
	c, err := sdktest.StartIn(t, newPlugin(now), map[string]any{"seed": "demo", "dsn": u.String()}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	create := booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-09T10:00:00Z"}

	proxy.cut()
	for _, call := range []struct {
		capability string
		args       any
	}{
		{"booking.list", nil},
		{"booking.availability", booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-09"}},
		{"booking.create", create},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := c.Invoke(ctx, call.capability, carol, call.args)
		cancel()
		if sdk.CodeOf(err) != sdk.CodeUnavailable {
			t.Fatalf("%s with the database away: %v; want an unavailable error", call.capability, err)
		}
		msg := err.Error()
		for _, want := range []string{"booking database", "nothing was changed"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", call.capability, msg, want)
			}
		}
		if strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, proxy.addr) {
			t.Errorf("%s: %q names the database's address", call.capability, msg)
		}
	}

	proxy.mend()
	var b booking.Booking
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		raw, err := c.Invoke(context.Background(), "booking.create", carol, create)
		if err == nil {
			if b, err = decode[booking.Booking](raw); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("booking.create after the database came back: %v", err)
		}
	}
	if got := list(t, c, carol, nil); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("carol's bookings = %+v; want just %s: the failed create must have booked nothing", got, b.ID)
	}
}

func decode[T any](raw []byte) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}
