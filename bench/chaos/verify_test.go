//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// verify checks, with every dependency up and read directly rather than
// through the proxies, that each acknowledged write is there: the booking
// in PostgreSQL, the approval through the admin API, the call's audit
// record, and the booking.created event in the stream. It charges what is
// missing to the fault it was made in and returns the totals.
func verify(t *testing.T, recs []record, pg, natsDep *dependency, stream string, c *client, r *replica, began time.Time, results []*result) lostWrites {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	byName := map[string]*result{}
	for _, res := range results {
		byName[res.String()] = res
	}
	charge := func(rec record, f func(*lostWrites)) {
		if res := byName[rec.scenario]; res != nil {
			f(&res.lost)
		}
	}
	var total lostWrites

	// Bookings.
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	defer conn.Close(context.Background())
	var ids []string
	for _, rec := range recs {
		if rec.booking != "" {
			ids = append(ids, rec.booking)
		}
	}
	stored := map[string]bool{}
	rows, err := conn.Query(ctx, "SELECT id FROM bookings WHERE id = ANY($1)", ids)
	if err != nil {
		t.Fatalf("verify bookings: %v", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// Audit records of the actions, by request id.
	audited := map[string]bool{}
	for _, capability := range []string{string(opCreate), string(opCancel)} {
		after := ""
		for {
			q := url.Values{"capability": {capability}, "since": {began.UTC().Format(time.RFC3339)}, "order": {"oldest"}, "limit": {"1000"}}
			if after != "" {
				q.Set("after", after)
			}
			var page struct {
				Records []struct {
					RequestID string `json:"request_id"`
					Decision  string `json:"decision"`
				} `json:"records"`
				Next json.Number `json:"next"`
				More bool        `json:"more"`
			}
			if _, err := c.admin(r, http.MethodGet, "/api/v1/admin/audit?"+q.Encode(), nil, &page); err != nil {
				t.Fatalf("verify audit: %v", err)
			}
			for _, a := range page.Records {
				if a.Decision == "admitted" {
					audited[a.RequestID] = true
				}
			}
			if !page.More || len(page.Records) == 0 {
				break
			}
			after = page.Next.String()
		}
	}

	// Events, read from the stream itself.
	events := map[string]bool{}
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsDep.port))
	if err != nil {
		t.Fatalf("verify events: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("verify events: %v", err)
	}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatalf("verify events: %v", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			var ev struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			}
			if json.Unmarshal(msg.Data(), &ev) == nil && ev.Type == "booking.created" {
				events[ev.ID] = true
			}
		}
		if batch.Error() != nil {
			t.Fatalf("verify events: %v", batch.Error())
		}
		if n == 0 {
			break
		}
	}

	for _, rec := range recs {
		switch {
		case rec.booking != "":
			if !stored[rec.booking] {
				total.bookings++
				charge(rec, func(l *lostWrites) { l.bookings++ })
				t.Errorf("booking %s, acknowledged during %s at %s, is not in the database", rec.booking, rec.scenario, rec.sent.Format(time.RFC3339Nano))
			}
			if !events[rec.booking] {
				if res := byName[rec.scenario]; res != nil && res.dep == "nats" && rec.sent.Before(res.end.Add(recoveryBound)) && rec.sent.Add(rec.took).After(res.start) {
					// Made while NATS was away: the booking plugin publishes
					// after its commit and logs a failed publish.
					total.eventsInFault++
					res.lost.eventsInFault++
				} else {
					total.events++
					charge(rec, func(l *lostWrites) { l.events++ })
					t.Errorf("booking %s, acknowledged during %s with NATS up, has no booking.created event in the stream", rec.booking, rec.scenario)
				}
			}
		case rec.approval != "":
			if code, err := c.admin(r, http.MethodGet, "/api/v1/admin/approvals/"+rec.approval, nil, nil); err != nil {
				total.approvals++
				charge(rec, func(l *lostWrites) { l.approvals++ })
				t.Errorf("approval %s, acknowledged during %s, is gone (%d): %v", rec.approval, rec.scenario, code, err)
			}
		}
		if (rec.booking != "" || rec.approval != "") && !audited[rec.reqID] {
			total.audit++
			charge(rec, func(l *lostWrites) { l.audit++ })
			t.Errorf("%s %s, acknowledged during %s, has no audit record", rec.op, rec.reqID, rec.scenario)
		}
	}
	t.Logf("verified %d bookings, %d audit records, %d events", len(ids), len(audited), len(events))
	return total
}
