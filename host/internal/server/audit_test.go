package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/sdk/pgtest"
)

// auditT0 is where the test trail starts: far from any real clock.
var auditT0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// auditTrail is the test trail, oldest first; each record's RequestID
// names it.
func auditTrail() []audit.Record {
	at := func(m int) time.Time { return auditT0.Add(time.Duration(m) * time.Minute) }
	return []audit.Record{
		{RequestID: "r1", Time: at(0), Protocol: "mcp", ProtocolVersion: "2025-11-25", TokenLabel: "ops", Role: "admin", Scope: "admin",
			UserID: "u-admin", Capability: "booking.read", Plugin: "booking", Args: json.RawMessage(`{"id":"b-1","card":"[redacted]"}`),
			Decision: audit.Admitted, Outcome: audit.OutcomeOK, Latency: 2 * time.Millisecond},
		{RequestID: "r2", Time: at(1), TokenLabel: "shop", Role: "customer", Scope: "action", UserID: "u-alice",
			Capability: "booking.create", Decision: audit.Refused, Step: "permission", Reason: "role customer lacks booking.write"},
		{RequestID: "r3", Time: at(2), TokenLabel: "shop", UserID: "u-alice", Capability: "booking.create",
			Decision: audit.Admitted, Outcome: audit.OutcomeToolError, ErrorCode: "conflict", Latency: 40 * time.Millisecond},
		{RequestID: "r4", Time: at(3), TokenLabel: "shop", UserID: "u-bob", Capability: "booking.read",
			Decision: audit.Refused, Step: "rate_limit", Reason: "over 5/m"},
		{RequestID: "r5", Time: at(4), ParentID: "01PARENT", TokenLabel: "ops", Capability: "platform.search",
			Decision: audit.Admitted, Outcome: audit.OutcomeInternalError, ErrorRef: "E-123", Latency: time.Second},
		{RequestID: "r6", Time: at(5), TokenLabel: "ops", UserID: "u-admin", Capability: "booking.read",
			Decision: audit.Admitted, Outcome: audit.OutcomeOK, Latency: 300 * time.Microsecond},
	}
}

// auditStore is a SQLite audit store holding the test trail, closed at
// cleanup, and the Seq of each record by request id.
func auditStore(t *testing.T) (audit.Store, map[string]int64) {
	t.Helper()
	return auditStoreAt(t, "", t.TempDir())
}

// auditStoreAt is auditStore on the store at dsn (PostgreSQL) or in
// dataDir (SQLite).
func auditStoreAt(t *testing.T, dsn, dataDir string) (audit.Store, map[string]int64) {
	t.Helper()
	st, err := audit.Open(context.Background(), dsn, dataDir)
	if err != nil {
		t.Fatalf("open audit store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Append(context.Background(), auditTrail()); err != nil {
		t.Fatalf("append: %v", err)
	}
	page, err := st.Query(context.Background(), audit.Filter{Order: audit.OldestFirst})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	seq := map[string]int64{}
	for _, r := range page.Records {
		seq[r.RequestID] = r.Seq
	}
	return st, seq
}

// getAuditPage requests the audit route with query q and token (none when
// empty), returning the status and body.
func getAuditPage(t *testing.T, srv *Server, token, q string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, AdminAuditPath+"?"+q, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// getAudit is getAuditPage's whole answer, for its headers.
func getAudit(t *testing.T, srv *Server, token, q string) *httptest.ResponseRecorder {
	t.Helper()
	return adminGet(t, srv, http.MethodGet, AdminAuditPath+"?"+q, token, "")
}

// decodePage decodes an answer of status 200.
func decodePage(t *testing.T, code int, body []byte) AuditPage {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", code, body)
	}
	var p AuditPage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}

// adminPage gets a page with the admin token and query q.
func adminPage(t *testing.T, srv *Server, q string) AuditPage {
	t.Helper()
	code, body := getAuditPage(t, srv, adminToken, q)
	return decodePage(t, code, body)
}

func requestIDs(p AuditPage) []string {
	ids := []string{}
	for _, r := range p.Records {
		ids = append(ids, r.RequestID)
	}
	return ids
}

// TestAuditAccess: only admin-scope tokens read the trail; without a
// token, with an unknown one, or without an audit store the route cannot
// be told from an absent one.
func TestAuditAccess(t *testing.T) {
	st, _ := auditStore(t)
	srv := newFixture(t, func(o *Options) { o.Audit = st }).srv
	if got := requestIDs(adminPage(t, srv, "")); len(got) != 6 {
		t.Fatalf("admin token read %v; want the 6 records", got)
	}
	rec := getAudit(t, srv, aliceToken, "")
	if p := problemOf(t, rec, http.StatusForbidden); !strings.Contains(p.Detail, "scope admin") {
		t.Fatalf("action token: %+v; want 403 naming the scope", p)
	}
	if strings.Contains(rec.Body.String(), "booking") {
		t.Fatalf("a refused token was shown records: %s", rec.Body)
	}

	absent := func(t *testing.T, srv *Server, token string) {
		t.Helper()
		get := func(path string) []byte {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusNotFound {
				t.Fatalf("GET %s: status %d, want 404", path, rec.Code)
			}
			var b bytes.Buffer
			_ = rec.Result().Header.Write(&b)
			return append(b.Bytes(), rec.Body.Bytes()...)
		}
		if route, unknown := get(AdminAuditPath+"?limit=1"), get("/api/v1/admin/nothing-here?limit=1"); !bytes.Equal(route, unknown) {
			t.Fatalf("route answers differently from an absent one:\n%s\n---\n%s", route, unknown)
		}
	}
	t.Run("no token", func(t *testing.T) { absent(t, srv, "") })
	t.Run("unknown token", func(t *testing.T) { absent(t, srv, "unknown-token-0123456789") })
	noAudit := newFixture(t, nil).srv
	t.Run("no audit store, admin token", func(t *testing.T) { absent(t, noAudit, adminToken) })
	t.Run("no audit store, action token", func(t *testing.T) { absent(t, noAudit, aliceToken) })
}

// TestAuditFilters: each parameter selects what audit.Filter does, in the
// order asked for.
func TestAuditFilters(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testAuditFilters(t, "", t.TempDir()) })
	t.Run("postgres", func(t *testing.T) { testAuditFilters(t, pgtest.SchemaDSN(t), "") })
}

func testAuditFilters(t *testing.T, dsn, dataDir string) {
	st, seq := auditStoreAt(t, dsn, dataDir)
	srv := newFixture(t, func(o *Options) { o.Audit = st }).srv
	at := func(m int) string { return auditT0.Add(time.Duration(m) * time.Minute).Format(time.RFC3339) }
	for _, tc := range []struct {
		query url.Values
		want  []string
	}{
		{url.Values{}, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
		{url.Values{"order": {"newest"}}, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
		{url.Values{"order": {"oldest"}}, []string{"r1", "r2", "r3", "r4", "r5", "r6"}},
		{url.Values{"token": {"shop"}}, []string{"r4", "r3", "r2"}},
		{url.Values{"user": {"u-alice"}}, []string{"r3", "r2"}},
		{url.Values{"capability": {"booking.read"}}, []string{"r6", "r4", "r1"}},
		{url.Values{"decision": {"refused"}}, []string{"r4", "r2"}},
		{url.Values{"decision": {"admitted"}}, []string{"r6", "r5", "r3", "r1"}},
		{url.Values{"step": {"rate_limit"}}, []string{"r4"}},
		{url.Values{"request": {"r3"}}, []string{"r3"}},
		{url.Values{"since": {at(2)}}, []string{"r6", "r5", "r4", "r3"}},
		{url.Values{"until": {at(2)}}, []string{"r2", "r1"}},
		{url.Values{"since": {at(2)}, "until": {at(4)}}, []string{"r4", "r3"}},
		{url.Values{"since": {auditT0.Add(90 * time.Second).Format(time.RFC3339Nano)}, "until": {"2030-01-07T10:03:00+01:00"}}, []string{"r3"}},
		{url.Values{"token": {"shop"}, "decision": {"admitted"}}, []string{"r3"}},
		{url.Values{"token": {"nobody"}}, []string{}},
		{url.Values{"limit": {"2"}}, []string{"r6", "r5"}},
		{url.Values{"after": {strconv.FormatInt(seq["r4"], 10)}}, []string{"r3", "r2", "r1"}},
		{url.Values{"after": {strconv.FormatInt(seq["r4"], 10)}, "order": {"oldest"}}, []string{"r5", "r6"}},
	} {
		t.Run(tc.query.Encode(), func(t *testing.T) {
			if got := requestIDs(adminPage(t, srv, tc.query.Encode())); !slices.Equal(got, tc.want) {
				t.Fatalf("records %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAuditRecordFields: every field of a record is in the answer under
// its documented name, always present.
func TestAuditRecordFields(t *testing.T) {
	st, seq := auditStore(t)
	srv := newFixture(t, func(o *Options) { o.Audit = st }).srv
	_, body := getAuditPage(t, srv, adminToken, "request=r1")
	var raw struct {
		Records []map[string]json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || len(raw.Records) != 1 {
		t.Fatalf("answer %s: %v", body, err)
	}
	got := raw.Records[0]
	want := map[string]string{
		"seq": strconv.FormatInt(seq["r1"], 10), "parent_id": `""`, "time": `"2030-01-07T09:00:00Z"`,
		"request_id": `"r1"`, "protocol": `"mcp"`, "protocol_version": `"2025-11-25"`, "token_label": `"ops"`,
		"role": `"admin"`, "scope": `"admin"`, "user_id": `"u-admin"`, "capability": `"booking.read"`,
		"plugin": `"booking"`, "args": `{"id":"b-1","card":"[redacted]"}`, "decision": `"admitted"`, "step": `""`,
		"reason": `""`, "outcome": `"ok"`, "error_code": `""`, "error_ref": `""`, "latency_ns": "2000000",
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("field %s = %s, want %s", k, got[k], v)
		}
	}
	var id string
	if err := json.Unmarshal(got["id"], &id); err != nil || id == "" {
		t.Errorf("field id = %s, want the record's id", got["id"])
	}
	if len(got) != len(want)+1 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		})
		t.Errorf("fields %v; want exactly id and %d others", keys, len(want))
	}

	_, body = getAuditPage(t, srv, adminToken, "request=r2")
	p := decodePage(t, http.StatusOK, body)
	if r := p.Records[0]; string(r.Args) != "null" || r.Decision != "refused" || r.Step != "permission" || r.Reason != "role customer lacks booking.write" || r.Outcome != "" {
		t.Fatalf("refused record %+v", r)
	}
	if !strings.Contains(string(body), `"args":null`) {
		t.Fatalf("a record without args should say args null: %s", body)
	}
}

// TestAuditPaging: next and more walk the whole trail in either order,
// each record once.
func TestAuditPaging(t *testing.T) {
	st, _ := auditStore(t)
	srv := newFixture(t, func(o *Options) { o.Audit = st }).srv
	for _, tc := range []struct {
		order string
		want  []string
	}{
		{"newest", []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
		{"oldest", []string{"r1", "r2", "r3", "r4", "r5", "r6"}},
	} {
		t.Run(tc.order, func(t *testing.T) {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > len(tc.want) {
					t.Fatalf("paging does not end: %v", got)
				}
				q := url.Values{"order": {tc.order}, "limit": {"4"}}
				if after != "" {
					q.Set("after", after)
				}
				p := adminPage(t, srv, q.Encode())
				got = append(got, requestIDs(p)...)
				if wantMore := len(got) < len(tc.want); p.More != wantMore {
					t.Fatalf("after %v: more = %v, want %v", got, p.More, wantMore)
				}
				if len(p.Records) > 0 && p.Next != p.Records[len(p.Records)-1].Seq {
					t.Fatalf("next %d is not the last record's seq %d", p.Next, p.Records[len(p.Records)-1].Seq)
				}
				if !p.More {
					break
				}
				after = strconv.FormatInt(p.Next, 10)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pages gave %v, want %v", got, tc.want)
			}
		})
	}

	// Past the end, a page is empty and keeps the cursor: a follower
	// polling with it misses nothing appended later.
	last := adminPage(t, srv, "order=oldest")
	end := adminPage(t, srv, "order=oldest&after="+strconv.FormatInt(last.Next, 10))
	if len(end.Records) != 0 || end.More || end.Next != last.Next {
		t.Fatalf("past the end: %+v; want no records and next %d", end, last.Next)
	}
	if err := st.Append(context.Background(), []audit.Record{{RequestID: "r7", Capability: "booking.read", Decision: audit.Admitted, Outcome: audit.OutcomeOK}}); err != nil {
		t.Fatal(err)
	}
	if got := requestIDs(adminPage(t, srv, "order=oldest&after="+strconv.FormatInt(end.Next, 10))); !slices.Equal(got, []string{"r7"}) {
		t.Fatalf("following on gave %v, want [r7]", got)
	}
}

// TestAuditBadParameters: a bad parameter is a 400 naming it, and no
// query runs.
func TestAuditBadParameters(t *testing.T) {
	st, _ := auditStore(t)
	srv := newFixture(t, func(o *Options) { o.Audit = st }).srv
	for _, tc := range []struct{ query, want string }{
		{"since=yesterday", "parameter since"},
		{"since=1h", "parameter since"},
		{"until=2030-13-01T00:00:00Z", "parameter until"},
		{"since=2030-01-07T10:00:00Z&until=2030-01-07T09:00:00Z", "until must be after since"},
		{"since=2030-01-07T10:00:00Z&until=2030-01-07T10:00:00Z", "until must be after since"},
		{"decision=maybe", "parameter decision"},
		{"order=sideways", "parameter order"},
		{"after=-1", "parameter after"},
		{"after=x", "parameter after"},
		{"after=99999999999999999999", "parameter after"},
		{"limit=0", "parameter limit"},
		{"limit=1001", "parameter limit"},
		{"limit=ten", "parameter limit"},
		{"token=" + strings.Repeat("t", audit.MaxLabelLen+1), "parameter token"},
		{"user=" + strings.Repeat("u", audit.MaxNameLen+1), "parameter user"},
		{"capability=" + strings.Repeat("c", audit.MaxNameLen+1), "parameter capability"},
		{"step=" + strings.Repeat("s", audit.MaxProtocolLen+1), "parameter step"},
		{"request=" + strings.Repeat("r", audit.MaxRequestIDLen+1), "parameter request"},
		{"colour=red", `unknown parameter "colour"`},
		{"Token=shop", `unknown parameter "Token"`},
		{"token=a&token=b", "parameter token is given 2 times"},
		{"decision=" + strings.Repeat("x", 500), "parameter decision"},
	} {
		t.Run(tc.query[:min(len(tc.query), 40)], func(t *testing.T) {
			p := problemOf(t, getAudit(t, srv, adminToken, tc.query), http.StatusBadRequest)
			if !strings.Contains(p.Detail, tc.want) {
				t.Fatalf("detail %q; want it to contain %q", p.Detail, tc.want)
			}
			if len(p.Detail) > 300 {
				t.Fatalf("detail is %d bytes: caller input must be bounded in it", len(p.Detail))
			}
		})
	}
}

// TestAuditStoreDown: a store that fails is a 503 with a generic message;
// the cause goes to the log, not to the caller.
func TestAuditStoreDown(t *testing.T) {
	st, _ := auditStore(t)
	f := newFixture(t, func(o *Options) { o.Audit = st })
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	rec := getAudit(t, f.srv, adminToken, "")
	if p := problemOf(t, rec, http.StatusServiceUnavailable); p.Detail != "the audit trail cannot be read now; try again later" {
		t.Fatalf("detail %q; want the generic one", p.Detail)
	}
	if body := rec.Body.String(); strings.Contains(body, "closed") || strings.Contains(body, "sql") {
		t.Fatalf("the cause leaked to the caller: %s", body)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "admin: reading the audit trail failed") || !strings.Contains(logs, "closed") {
		t.Fatalf("log lacks the failure and its cause:\n%s", logs)
	}
}

// TestNewAuditRecordDamagedArgs: a stored row whose args are not JSON
// still yields a writable record.
func TestNewAuditRecordDamagedArgs(t *testing.T) {
	r := NewAuditRecord(audit.Record{Capability: "x", Args: json.RawMessage(`{"half`)})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if !strings.Contains(string(b), `"args":{"$audit":"unreadable","bytes":6}`) {
		t.Fatalf("record %s; want the args replaced by a placeholder", b)
	}
}
