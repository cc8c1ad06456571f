package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeBooking answers tools/list, booking.list and booking.get as capgate
// would, with integer booking ids, and records booking.get's arguments.
func fakeBooking(t *testing.T, schema string, got *string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req struct {
			Method string `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Errorf("bad request: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		var result string
		switch {
		case req.Method == "tools/list":
			result = `{"tools":[{"name":"booking.list","inputSchema":{"type":"object"}},{"name":"booking.get","inputSchema":` + schema + `}]}`
		case req.Params.Name == "booking.list":
			result = `{"structuredContent":{"bookings":[{"id":41,"user_id":"bob"},{"id":42,"user_id":"alice"}]}}`
		case req.Params.Name == "booking.get":
			*got = string(req.Params.Arguments)
			result = `{"structuredContent":{"id":42,"user_id":"alice"}}`
		default:
			t.Errorf("unexpected request %s", raw)
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":%s}`, result)
	}))
}

func TestBookingJob(t *testing.T) {
	for name, tc := range map[string]struct{ schema, wantArgs string }{
		"integer id":          {`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`, `{"id":42}`},
		"string booking_id":   {`{"type":"object","properties":{"booking_id":{"type":"string"},"verbose":{"type":"boolean"}}}`, `{"booking_id":"42"}`},
		"single required arg": {`{"type":"object","properties":{"ref":{"type":"integer"},"verbose":{"type":"boolean"}},"required":["ref"]}`, `{"ref":42}`},
	} {
		t.Run(name, func(t *testing.T) {
			var got string
			srv := fakeBooking(t, tc.schema, &got)
			defer srv.Close()
			j, err := bookingJob(context.Background(), srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantArgs {
				t.Errorf("booking.get args = %s, want %s", got, tc.wantArgs)
			}
			if j.marker != "42" || !strings.Contains(string(j.body), `"name":"booking.get"`) || !strings.Contains(string(j.body), tc.wantArgs) {
				t.Errorf("job = %+v (body %s)", j, j.body)
			}
		})
	}
}

func TestBookingJobUnclearSchema(t *testing.T) {
	var got string
	srv := fakeBooking(t, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}`, &got)
	defer srv.Close()
	if _, err := bookingJob(context.Background(), srv.URL); err == nil || !strings.Contains(err.Error(), "no single id argument") {
		t.Fatalf("err = %v", err)
	}
}
