package rest

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// TestDuplicateMembersRefused posts arguments naming a member twice: the
// call is refused with 422 invalid_input naming the member and its place,
// and the action does not run.
func TestDuplicateMembersRefused(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	cases := []struct {
		body, detail string
	}{
		{`{"id":"b-1","title":"x","title":"y"}`, `invalid arguments for ` + mcptest.Rename + `: duplicate member "title" at /title`},
		{`{"id":"b-1","title":"x","meta":{"by":"a","by":"b"}}`, `invalid arguments for ` + mcptest.Rename + `: duplicate member "by" at /meta/by`},
		{`{"id":"b-1","title":"x","\u0074itle":"y"}`, `invalid arguments for ` + mcptest.Rename + `: duplicate member "title" at /title`},
	}
	for _, tc := range cases {
		t.Run(tc.body, func(t *testing.T) {
			rep := f.post(mcptest.Alice, mcptest.Rename, tc.body)
			if rep.status != 422 {
				t.Fatalf("status %d, want 422: %s", rep.status, rep.body)
			}
			d := rep.problem(t)
			if d.Code != dispatch.InvalidInput.String() || d.Detail != tc.detail || d.Capability != mcptest.Rename {
				t.Fatalf("problem %+v, want invalid_input %q", d, tc.detail)
			}
		})
	}
	if got := f.post(mcptest.Alice, mcptest.BookingGet, `{"id":"b-1"}`); got.status != 200 || !strings.Contains(string(got.body), `"title":"Dentist"`) {
		t.Fatalf("the refused renames ran: %d %s", got.status, got.body)
	}
}
