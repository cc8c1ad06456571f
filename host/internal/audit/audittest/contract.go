// Package audittest is the behaviour an audit store must show on every
// engine, written once: an engine's test calls RunContract with a function
// giving each test a fresh, empty database. FailWrites makes a real store
// refuse writes, for the failure paths of the store and of its writer.
package audittest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
)

// Where returns the location of a fresh, empty database for one test, as
// audit.Open takes it: a PostgreSQL DSN (dataDir unused), or an empty dsn
// and the data directory holding the SQLite file.
type Where func(t *testing.T) (dsn, dataDir string)

// RunContract runs the contract, its tests in parallel, each on its own
// database opened with audit.Open at where(t). Several handles on one
// database stand for several hosts (replicas) sharing it.
func RunContract(t *testing.T, where Where) {
	tests := []struct {
		name string
		run  func(t *testing.T, e *Env)
	}{
		{"RoundTrip", testRoundTrip},
		{"FillsIDAndTime", testFillsIDAndTime},
		{"Bounds", testBounds},
		{"InvalidRecords", testInvalidRecords},
		{"BatchAllOrNothing", testBatchAllOrNothing},
		{"Filters", testFilters},
		{"TimeRange", testTimeRange},
		{"Paging", testPaging},
		{"PagingAcrossAppends", testPagingAcrossAppends},
		{"InvalidFilters", testInvalidFilters},
		{"Follow", testFollow},
		{"DeleteBefore", testDeleteBefore},
		{"SeqNeverReused", testSeqNeverReused},
		{"ConcurrentAppendsFollowed", testConcurrentAppendsFollowed},
		{"ConcurrentDeletes", testConcurrentDeletes},
		{"Reopen", testReopen},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn, dir := where(t)
			tc.run(t, &Env{T: t, DSN: dsn, Dir: dir})
		})
	}
}

// T0 is where test records' times start: far from any real clock.
var T0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// Env is one test's database.
type Env struct {
	T        *testing.T
	DSN, Dir string
}

// Open opens another handle on the test's database, closed at cleanup
// unless the test closes it first.
func (e *Env) Open(opts ...audit.Option) audit.Store {
	e.T.Helper()
	s, err := audit.Open(context.Background(), e.DSN, e.Dir, opts...)
	if err != nil {
		e.T.Fatalf("Open: %v", err)
	}
	var once sync.Once
	e.T.Cleanup(func() { once.Do(func() { _ = s.Close() }) })
	return s
}

// FailWrites makes the database refuse every insert of audit records (of
// those holding one request id, when requestID is not empty) until the
// returned function is called: a trigger that raises an error, so the
// failure is the engine's own, inside the append's transaction.
func (e *Env) FailWrites(requestID string) (repair func()) {
	e.T.Helper()
	return e.refuse("INSERT", func(pg bool) string {
		if requestID == "" {
			return "NEW.records > 0"
		}
		// The block's keys hold each request id between two 0x1F.
		lit := "'r:" + strings.ReplaceAll(requestID, "'", "''") + "'"
		if pg {
			return "strpos(NEW.keys, chr(31) || " + lit + " || chr(31)) > 0"
		}
		return "instr(NEW.keys, char(31) || " + lit + " || char(31)) > 0"
	})
}

// FailDeletes makes the database refuse every delete of audit records
// until the returned function is called.
func (e *Env) FailDeletes() (repair func()) {
	e.T.Helper()
	return e.refuse("DELETE", func(bool) string { return "OLD.records > 0" })
}

func (e *Env) refuse(event string, cond func(pg bool) string) (repair func()) {
	e.T.Helper()
	db, pg := e.raw()
	name := "audit_test_refuse_" + strings.ToLower(event)
	var create, drop []string
	if pg {
		create = []string{
			`CREATE OR REPLACE FUNCTION audit_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
				$$BEGIN RAISE EXCEPTION 'audit test: writes refused'; END$$`,
			`CREATE TRIGGER ` + name + ` BEFORE ` + event + ` ON audit_blocks FOR EACH ROW WHEN (` + cond(true) + `)
				EXECUTE FUNCTION audit_test_refuse()`,
		}
		drop = []string{`DROP TRIGGER ` + name + ` ON audit_blocks`}
	} else {
		create = []string{`CREATE TRIGGER ` + name + ` BEFORE ` + event + ` ON audit_blocks WHEN ` + cond(false) + `
			BEGIN SELECT RAISE(ABORT, 'audit test: writes refused'); END`}
		drop = []string{`DROP TRIGGER ` + name}
	}
	exec := func(stmts []string) {
		for _, q := range stmts {
			if _, err := db.Exec(q); err != nil {
				e.T.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec(create)
	var once sync.Once
	repair = func() { once.Do(func() { exec(drop); db.Close() }) }
	e.T.Cleanup(repair)
	return repair
}

// Raw opens the test's database without the store, closed at cleanup.
func (e *Env) Raw() *sql.DB {
	e.T.Helper()
	db, _ := e.raw()
	e.T.Cleanup(func() { db.Close() })
	return db
}

// raw opens the test's database without the store, to break it.
func (e *Env) raw() (*sql.DB, bool) {
	e.T.Helper()
	if e.DSN != "" {
		db, err := sql.Open("pgx", e.DSN)
		if err != nil {
			e.T.Fatal(err)
		}
		return db, true
	}
	db, err := sql.Open("sqlite", filepath.Join(e.Dir, audit.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		e.T.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db, false
}

func ctx() context.Context { return context.Background() }

// Rec returns an admitted, successful record of capability at T0+offset.
func Rec(requestID, capability string, offset time.Duration) audit.Record {
	return audit.Record{
		Time: T0.Add(offset), RequestID: requestID, Protocol: "mcp", ProtocolVersion: "2025-06-18",
		TokenLabel: "ci-bot", Role: "member", Scope: "action", UserID: "alice",
		Capability: capability, Plugin: "booking", Args: json.RawMessage(`{"resource_id":"room-a"}`),
		Decision: audit.Admitted, Outcome: audit.OutcomeOK, Latency: 1500 * time.Microsecond,
	}
}

func refused(requestID, capability, step string, offset time.Duration) audit.Record {
	r := Rec(requestID, capability, offset)
	r.Decision, r.Outcome, r.Step, r.Reason, r.Latency = audit.Refused, "", step, "role \"member\" does not hold permission", 0
	return r
}

func mustAppend(t *testing.T, s audit.Store, rs ...audit.Record) {
	t.Helper()
	if err := s.Append(ctx(), rs); err != nil {
		t.Fatalf("Append(%d records): %v", len(rs), err)
	}
}

func query(t *testing.T, s audit.Store, f audit.Filter) audit.Page {
	t.Helper()
	p, err := s.Query(ctx(), f)
	if err != nil {
		t.Fatalf("Query(%+v): %v", f, err)
	}
	return p
}

// All returns every record of s, oldest first, reading page by page.
func All(t *testing.T, s audit.Store, f audit.Filter) []audit.Record {
	t.Helper()
	f.Order, f.Limit = audit.OldestFirst, audit.MaxLimit
	var out []audit.Record
	for {
		p := query(t, s, f)
		out = append(out, p.Records...)
		if !p.More {
			return out
		}
		f.After = p.Next
	}
}

func requestIDs(rs []audit.Record) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.RequestID
	}
	return ids
}

func wantRequests(t *testing.T, what string, got []audit.Record, want ...string) {
	t.Helper()
	if g := requestIDs(got); !reflect.DeepEqual(g, want) && !(len(g) == 0 && len(want) == 0) {
		t.Fatalf("%s: request ids %v; want %v", what, g, want)
	}
}

func testRoundTrip(t *testing.T, e *Env) {
	s := e.Open()
	in := []audit.Record{
		Rec("r1", "booking.create", 0),
		refused("r2", "booking.cancel", "permission", time.Second),
		Rec("r3", "platform.search", 2*time.Second),
		Rec("r4", "hello.greet", 3*time.Second),
	}
	in[0].ID = audit.NewID(in[0].Time)
	in[0].Time = in[0].Time.Add(123456789 * time.Nanosecond) // kept to the microsecond
	in[0].Args = json.RawMessage(" {\n \"note\" : \"é \\u00e9 <&>\", \"n\": [1, 2.50, 1e3]}\n")
	in[2].ParentID = in[0].ID
	in[2].Outcome, in[2].ErrorCode = audit.OutcomeToolError, "conflict"
	in[3].Outcome, in[3].ErrorRef, in[3].Args = audit.OutcomeInternalError, "err-7f3a", nil
	in[3].UserID, in[3].Scope = "", "read"
	mustAppend(t, s, in...)
	got := All(t, s, audit.Filter{})
	if len(got) != len(in) {
		t.Fatalf("stored %d records; want %d", len(got), len(in))
	}
	for i := range in {
		want := in[i]
		want.Seq, want.ID = got[i].Seq, got[i].ID
		want.Time = want.Time.Truncate(time.Microsecond)
		if i == 0 {
			want.ID = in[0].ID
			want.Args = json.RawMessage(`{"note":"é \u00e9 <&>","n":[1,2.50,1e3]}`)
		}
		if len(got[i].ID) != audit.IDLen {
			t.Errorf("record %d: ID %q; want %d characters", i, got[i].ID, audit.IDLen)
		}
		if i > 0 && got[i].Seq <= got[i-1].Seq {
			t.Errorf("record %d: seq %d after %d; want increasing", i, got[i].Seq, got[i-1].Seq)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
	if got[1].Args == nil || got[3].Args != nil {
		t.Errorf("args %q, %q; want present, then absent (nil)", got[1].Args, got[3].Args)
	}
}

func testFillsIDAndTime(t *testing.T, e *Env) {
	now := T0.Add(time.Hour + 42*time.Microsecond)
	s := e.Open(audit.WithClock(func() time.Time { return now }))
	r := Rec("r1", "booking.create", 0)
	r.Time = time.Time{}
	r.Seq = 99 // the store assigns Seq
	mustAppend(t, s, r, Rec("r2", "booking.create", 0))
	got := All(t, s, audit.Filter{})
	if len(got) != 2 {
		t.Fatalf("stored %d records; want 2", len(got))
	}
	if !got[0].Time.Equal(now) || got[0].Time.Location() != time.UTC {
		t.Errorf("time of a record appended without one = %v; want the store's clock %v in UTC", got[0].Time, now)
	}
	if got[0].ID == "" || got[1].ID == "" || got[0].ID == got[1].ID {
		t.Errorf("IDs %q, %q; want two distinct ones", got[0].ID, got[1].ID)
	}
	if got[0].Seq == 99 {
		t.Error("Append kept the caller's Seq")
	}
}

func testBounds(t *testing.T, e *Env) {
	s := e.Open()
	r := Rec(strings.Repeat("q", 500), strings.Repeat("c", 300), 0)
	// A long value whose cut falls inside a multi-byte rune.
	r.Reason = strings.Repeat("é", 2000)
	r.TokenLabel = "nul\x00 and \xff\xfe bytes"
	r.UserID = strings.Repeat("u", audit.MaxNameLen) // exactly at the bound: kept
	r.Plugin = strings.Repeat("p", audit.MaxLabelLen+1)
	big := `{"blob":"` + strings.Repeat("x", audit.MaxArgs) + `"}`
	r.Args = json.RawMessage(big)
	bad := Rec("bad-args", "booking.create", time.Second)
	bad.Args = json.RawMessage(`{"a":`)
	badUTF8 := Rec("bad-utf8", "booking.create", 2*time.Second)
	badUTF8.Args = json.RawMessage("{\"a\":\"\xff\"}")
	blank := Rec("blank-args", "booking.create", 3*time.Second)
	blank.Args = json.RawMessage(" \n ")
	mustAppend(t, s, r, bad, badUTF8, blank)
	got := All(t, s, audit.Filter{})
	if len(got) != 4 {
		t.Fatalf("stored %d records; want 4", len(got))
	}
	g := got[0]
	checkCut := func(name, v string, max int) {
		t.Helper()
		if len(v) > max || !strings.HasSuffix(v, audit.Cut) || !isValidUTF8(v) {
			t.Errorf("%s = %d bytes %q…; want at most %d bytes of valid UTF-8 ending in %q", name, len(v), firstBytes(v), max, audit.Cut)
		}
	}
	checkCut("RequestID", g.RequestID, audit.MaxRequestIDLen)
	checkCut("Capability", g.Capability, audit.MaxNameLen)
	checkCut("Reason", g.Reason, audit.MaxReasonLen)
	checkCut("Plugin", g.Plugin, audit.MaxLabelLen)
	if want := strings.Repeat("é", (audit.MaxReasonLen-len(audit.Cut))/2) + audit.Cut; g.Reason != want {
		t.Errorf("Reason cut to %d bytes; want %d (whole runes, then the marker)", len(g.Reason), len(want))
	}
	// A run of invalid bytes becomes one replacement character.
	if want := "nul\uFFFD and \uFFFD bytes"; g.TokenLabel != want {
		t.Errorf("TokenLabel = %q; want %q", g.TokenLabel, want)
	}
	if g.UserID != r.UserID {
		t.Errorf("UserID at its bound was changed to %d bytes", len(g.UserID))
	}
	wantArgs := func(i int, want string) {
		t.Helper()
		if string(got[i].Args) != want {
			t.Errorf("record %d args = %s; want %s", i, firstBytes(string(got[i].Args)), want)
		}
	}
	wantArgs(0, fmt.Sprintf(`{"$audit":"truncated","bytes":%d}`, len(big)))
	wantArgs(1, `{"$audit":"invalid","bytes":5}`)
	wantArgs(2, `{"$audit":"invalid","bytes":9}`)
	if got[3].Args != nil {
		t.Errorf("blank args stored as %q; want none", got[3].Args)
	}
}

func isValidUTF8(s string) bool {
	return strings.ToValidUTF8(s, "") == s && !strings.Contains(s, "\x00")
}

func firstBytes(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

func testInvalidRecords(t *testing.T, e *Env) {
	s := e.Open()
	good := Rec("good", "booking.create", 0)
	for _, tc := range []struct {
		name string
		edit func(r *audit.Record)
		want string
	}{
		{"no capability", func(r *audit.Record) { r.Capability = "" }, "no capability"},
		{"no decision", func(r *audit.Record) { r.Decision = "" }, `decision ""`},
		{"unknown decision", func(r *audit.Record) { r.Decision = "maybe" }, `decision "maybe"`},
		{"admitted without outcome", func(r *audit.Record) { r.Outcome = "" }, `outcome ""`},
		{"unknown outcome", func(r *audit.Record) { r.Outcome = "fine" }, `outcome "fine"`},
		{"admitted with a step", func(r *audit.Record) { r.Step = "scope" }, `refusing step "scope"`},
		{"refused without step", func(r *audit.Record) { r.Decision, r.Outcome = audit.Refused, "" }, "names no step"},
		{"refused with outcome", func(r *audit.Record) { r.Decision, r.Step = audit.Refused, "scope" }, `outcome "ok"; want none`},
		{"negative latency", func(r *audit.Record) { r.Latency = -time.Millisecond }, "negative latency"},
	} {
		bad := Rec("bad", "booking.create", time.Second)
		tc.edit(&bad)
		err := s.Append(ctx(), []audit.Record{good, bad})
		if !errors.Is(err, audit.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "record 2 of 2") {
			t.Errorf("%s: Append error = %v; want ErrInvalid naming record 2 of 2 and %q", tc.name, err, tc.want)
		}
	}
	wantRequests(t, "after invalid batches", All(t, s, audit.Filter{}))
	if err := s.Append(ctx(), nil); err != nil {
		t.Fatalf("Append(no records) = %v; want nil", err)
	}
}

func testBatchAllOrNothing(t *testing.T, e *Env) {
	s := e.Open()
	// More records than one block holds, failing in the second block.
	var batch []audit.Record
	for i := range 700 {
		batch = append(batch, Rec(fmt.Sprintf("r%03d", i), "booking.create", time.Duration(i)*time.Millisecond))
	}
	repair := e.FailWrites("r620")
	if err := s.Append(ctx(), batch); err == nil || !strings.Contains(err.Error(), "writes refused") {
		t.Fatalf("Append into a refusing database = %v; want the engine's error", err)
	}
	wantRequests(t, "after a failed batch", All(t, s, audit.Filter{}))
	repair()
	mustAppend(t, s, batch...)
	if got := All(t, s, audit.Filter{}); len(got) != len(batch) || got[0].RequestID != "r000" || got[699].RequestID != "r699" {
		t.Fatalf("after retrying the batch: %d records; want %d in order", len(got), len(batch))
	}
}

// fixture appends a varied set of records and returns them as stored.
func fixture(t *testing.T, s audit.Store) {
	t.Helper()
	a := Rec("a", "booking.create", 0)
	b := refused("b", "booking.cancel", "permission", time.Minute)
	b.TokenLabel, b.UserID = "ops", "bob"
	c := Rec("c", "booking.cancel", 2*time.Minute)
	c.Outcome, c.ErrorCode = audit.OutcomeToolError, "not_found"
	c.ApprovalID = "ap_c"
	d := refused("d", "booking.create", "audit", 3*time.Minute)
	d.UserID = ""
	f := Rec("f", "platform.search", 4*time.Minute)
	f.RequestID, f.ParentID = "a", "parent"
	mustAppend(t, s, a, b, c, d, f)
}

func testFilters(t *testing.T, e *Env) {
	s := e.Open()
	fixture(t, s)
	for _, tc := range []struct {
		f    audit.Filter
		want []string
	}{
		{audit.Filter{}, []string{"a", "b", "c", "d", "a"}},
		{audit.Filter{TokenLabel: "ops"}, []string{"b"}},
		{audit.Filter{TokenLabel: "ci-bot"}, []string{"a", "c", "d", "a"}},
		{audit.Filter{UserID: "alice"}, []string{"a", "c", "a"}},
		{audit.Filter{UserID: "ALICE"}, nil},
		{audit.Filter{Capability: "booking.create"}, []string{"a", "d"}},
		{audit.Filter{Capability: "booking"}, nil},
		{audit.Filter{Decision: audit.Refused}, []string{"b", "d"}},
		{audit.Filter{Decision: audit.Admitted}, []string{"a", "c", "a"}},
		{audit.Filter{Step: "audit"}, []string{"d"}},
		{audit.Filter{Decision: audit.Refused, Step: "permission"}, []string{"b"}},
		{audit.Filter{RequestID: "a"}, []string{"a", "a"}},
		{audit.Filter{UserID: "alice", Capability: "booking.cancel"}, []string{"c"}},
		{audit.Filter{TokenLabel: "ops", Decision: audit.Admitted}, nil},
		{audit.Filter{ApprovalID: "ap_c"}, []string{"c"}},
		{audit.Filter{ApprovalID: "ap_"}, nil},
	} {
		wantRequests(t, fmt.Sprintf("filter %+v", tc.f), All(t, s, tc.f), tc.want...)
	}
}

func testTimeRange(t *testing.T, e *Env) {
	s := e.Open()
	fixture(t, s) // at T0 + 0, 1, 2, 3, 4 minutes
	for _, tc := range []struct {
		since, until time.Duration // offsets from T0; -1: unset
		want         []string
	}{
		{time.Minute, -1, []string{"b", "c", "d", "a"}},
		{time.Minute + time.Microsecond, -1, []string{"c", "d", "a"}},
		{-1, 2 * time.Minute, []string{"a", "b"}},
		{-1, 2*time.Minute + time.Microsecond, []string{"a", "b", "c"}},
		{time.Minute, 3 * time.Minute, []string{"b", "c"}},
		{5 * time.Minute, -1, nil},
	} {
		var f audit.Filter
		if tc.since >= 0 {
			f.Since = T0.Add(tc.since)
		}
		if tc.until >= 0 {
			// Another zone: the instant counts, not its zone.
			f.Until = T0.Add(tc.until).In(time.FixedZone("UTC+2", 2*3600))
		}
		wantRequests(t, fmt.Sprintf("since %v until %v", tc.since, tc.until), All(t, s, f), tc.want...)
	}
}

func testPaging(t *testing.T, e *Env) {
	s := e.Open()
	var batch []audit.Record
	for i := range 250 {
		batch = append(batch, Rec(fmt.Sprintf("r%03d", i), "booking.create", time.Duration(i)*time.Second))
	}
	mustAppend(t, s, batch...)
	// The default: newest first, DefaultLimit a page.
	p := query(t, s, audit.Filter{})
	if len(p.Records) != audit.DefaultLimit || !p.More || p.Records[0].RequestID != "r249" || p.Records[99].RequestID != "r150" {
		t.Fatalf("first page: %d records from %s, more %v; want %d from r249 to r150, more", len(p.Records), p.Records[0].RequestID, p.More, audit.DefaultLimit)
	}
	if p.Next != p.Records[99].Seq {
		t.Fatalf("Next = %d; want the last record's seq %d", p.Next, p.Records[99].Seq)
	}
	p = query(t, s, audit.Filter{After: p.Next, Limit: 120})
	if len(p.Records) != 120 || !p.More || p.Records[0].RequestID != "r149" {
		t.Fatalf("second page: %d records from %s, more %v; want 120 from r149, more", len(p.Records), p.Records[0].RequestID, p.More)
	}
	p = query(t, s, audit.Filter{After: p.Next, Limit: 120})
	if len(p.Records) != 30 || p.More || p.Records[29].RequestID != "r000" {
		t.Fatalf("last page: %d records, more %v; want 30 ending at r000, no more", len(p.Records), p.More)
	}
	// Exactly a page left: More is false.
	p = query(t, s, audit.Filter{Order: audit.OldestFirst, Limit: 50, After: batch0Seq(t, s, 199)})
	if len(p.Records) != 50 || p.More || p.Records[0].RequestID != "r200" {
		t.Fatalf("oldest-first page of the last 50: %d records from %v, more %v; want 50 from r200, no more", len(p.Records), requestIDs(p.Records[:1]), p.More)
	}
	wantRequests(t, "oldest first, all", All(t, s, audit.Filter{})[:3], "r000", "r001", "r002")
	if got := len(query(t, s, audit.Filter{Limit: audit.MaxLimit}).Records); got != 250 {
		t.Fatalf("MaxLimit page has %d records; want all 250", got)
	}
}

// testPagingAcrossAppends reads pages and filters over many appends, with
// matches sparse and dense, in both orders, and a value holding the byte
// the store's keys are written between.
func testPagingAcrossAppends(t *testing.T, e *Env) {
	s := e.Open()
	const appends, size = 40, 13
	var want, wantBob []string
	for a := range appends {
		var rs []audit.Record
		for i := range size {
			r := Rec(fmt.Sprintf("a%02d-%02d", a, i), "booking.create", time.Duration(a*size+i)*time.Second)
			if (a*size+i)%37 == 0 {
				r.UserID, r.TokenLabel = "bob", "odd\x1flabel"
				wantBob = append(wantBob, r.RequestID)
			}
			want = append(want, r.RequestID)
			rs = append(rs, r)
		}
		mustAppend(t, s, rs...)
	}
	for _, order := range []audit.Order{audit.OldestFirst, audit.NewestFirst} {
		for _, limit := range []int{1, 7, 100, audit.MaxLimit} {
			for _, tc := range []struct {
				f    audit.Filter
				want []string
			}{
				{audit.Filter{}, want},
				{audit.Filter{UserID: "bob"}, wantBob},
				{audit.Filter{TokenLabel: "odd\x1flabel", Capability: "booking.create"}, wantBob},
				{audit.Filter{TokenLabel: "odd\uFFFDlabel"}, nil},
				{audit.Filter{Since: T0.Add(100 * time.Second), Until: T0.Add(110 * time.Second)}, want[100:110]},
			} {
				f := tc.f
				f.Order, f.Limit = order, limit
				var got []string
				for pages := 0; ; pages++ {
					p := query(t, s, f)
					got = append(got, requestIDs(p.Records)...)
					if !p.More {
						break
					}
					if len(p.Records) != limit || pages > len(want) {
						t.Fatalf("%+v: a page of %d records says more; want full pages", f, len(p.Records))
					}
					f.After = p.Next
				}
				w := slices.Clone(tc.want)
				if order == audit.NewestFirst {
					slices.Reverse(w)
				}
				if !slices.Equal(got, w) {
					t.Fatalf("%s first, limit %d, %+v:\n got %v\nwant %v", order, limit, tc.f, got, w)
				}
			}
		}
	}
}

// batch0Seq is the seq of record r<i> of testPaging's batch.
func batch0Seq(t *testing.T, s audit.Store, i int) int64 {
	t.Helper()
	p := query(t, s, audit.Filter{RequestID: fmt.Sprintf("r%03d", i)})
	if len(p.Records) != 1 {
		t.Fatalf("record r%03d: %d found", i, len(p.Records))
	}
	return p.Records[0].Seq
}

func testInvalidFilters(t *testing.T, e *Env) {
	s := e.Open()
	for _, tc := range []struct {
		f    audit.Filter
		want string
	}{
		{audit.Filter{Limit: -1}, "limit -1"},
		{audit.Filter{Limit: audit.MaxLimit + 1}, fmt.Sprintf("limit %d", audit.MaxLimit+1)},
		{audit.Filter{After: -5}, "cursor -5"},
		{audit.Filter{Since: T0, Until: T0}, "is not after since"},
		{audit.Filter{Since: T0, Until: T0.Add(-time.Hour)}, "is not after since"},
		{audit.Filter{Decision: "yes"}, `decision "yes"`},
		{audit.Filter{Order: "sideways"}, `order "sideways"`},
		{audit.Filter{UserID: strings.Repeat("u", audit.MaxNameLen+1)}, "user id is 256 bytes"},
		{audit.Filter{TokenLabel: strings.Repeat("t", audit.MaxLabelLen+1)}, "token label is"},
	} {
		_, err := s.Query(ctx(), tc.f)
		if !errors.Is(err, audit.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Query(%+v) error = %v; want ErrInvalid saying %q", tc.f, err, tc.want)
		}
	}
}

func testFollow(t *testing.T, e *Env) {
	s := e.Open()
	// A follower starting on an empty store.
	f := audit.Filter{Order: audit.OldestFirst, Capability: "booking.create"}
	p := query(t, s, f)
	if len(p.Records) != 0 || p.Next != 0 || p.More {
		t.Fatalf("empty store: %+v; want an empty page at cursor 0", p)
	}
	mustAppend(t, s, Rec("a", "booking.create", 0), Rec("x", "other.thing", 0), Rec("b", "booking.create", 0))
	p = query(t, s, f)
	wantRequests(t, "first poll", p.Records, "a", "b")
	f.After = p.Next
	p = query(t, s, f)
	if len(p.Records) != 0 || p.Next != f.After {
		t.Fatalf("poll with nothing new: %d records, next %d; want none, cursor kept at %d", len(p.Records), p.Next, f.After)
	}
	// Only non-matching records arrive: the cursor stays put.
	mustAppend(t, s, Rec("y", "other.thing", 0))
	p = query(t, s, f)
	if len(p.Records) != 0 || p.Next != f.After {
		t.Fatalf("poll after a non-matching record: next %d; want %d", p.Next, f.After)
	}
	// Records with earlier times still come after the cursor: the order
	// is the store's, not the records' clocks.
	mustAppend(t, s, Rec("c", "booking.create", -time.Hour), Rec("d", "booking.create", time.Hour))
	p = query(t, s, f)
	wantRequests(t, "poll after more", p.Records, "c", "d")
}

func testDeleteBefore(t *testing.T, e *Env) {
	s := e.Open()
	if n, err := s.DeleteBefore(ctx(), T0); err != nil || n != 0 {
		t.Fatalf("DeleteBefore on an empty store = %d, %v; want 0", n, err)
	}
	fixture(t, s) // at T0 + 0, 1, 2, 3, 4 minutes
	if n, err := s.DeleteBefore(ctx(), T0.Add(2*time.Minute)); err != nil || n != 2 {
		t.Fatalf("DeleteBefore(T0+2m) = %d, %v; want the 2 older records", n, err)
	}
	wantRequests(t, "after retention", All(t, s, audit.Filter{}), "c", "d", "a")
	if n, err := s.DeleteBefore(ctx(), T0.Add(2*time.Minute)); err != nil || n != 0 {
		t.Fatalf("second DeleteBefore = %d, %v; want 0", n, err)
	}
	if _, err := s.DeleteBefore(ctx(), time.Time{}); !errors.Is(err, audit.ErrInvalid) {
		t.Fatalf("DeleteBefore(zero time) error = %v; want ErrInvalid", err)
	}
	// More than one delete batch.
	var batch []audit.Record
	for i := range 2500 {
		batch = append(batch, Rec(fmt.Sprintf("old%04d", i), "booking.create", -time.Hour))
	}
	mustAppend(t, s, batch...)
	if n, err := s.DeleteBefore(ctx(), T0); err != nil || n != 2500 {
		t.Fatalf("DeleteBefore over batches = %d, %v; want 2500", n, err)
	}
	wantRequests(t, "after deleting the old batch", All(t, s, audit.Filter{}), "c", "d", "a")
}

func testSeqNeverReused(t *testing.T, e *Env) {
	s := e.Open()
	mustAppend(t, s, Rec("a", "x.y", 0), Rec("b", "x.y", 0))
	last := All(t, s, audit.Filter{})[1].Seq
	if n, err := s.DeleteBefore(ctx(), T0.Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("DeleteBefore = %d, %v; want 2", n, err)
	}
	mustAppend(t, s, Rec("c", "x.y", 0))
	// A follower at cursor last must see c.
	p := query(t, s, audit.Filter{Order: audit.OldestFirst, After: last})
	wantRequests(t, "after emptying the table", p.Records, "c")
}

func testConcurrentAppendsFollowed(t *testing.T, e *Env) {
	replicas := []audit.Store{e.Open(), e.Open()}
	const writers, batches, size = 6, 15, 7
	done := make(chan struct{})
	var (
		followed []audit.Record
		ferr     error
		fwg      sync.WaitGroup
	)
	// A follower polls while the replicas append: it must meet every
	// record exactly once, however the commits interleave.
	follower := e.Open()
	fwg.Go(func() {
		f := audit.Filter{Order: audit.OldestFirst, Limit: 50}
		final := false
		for {
			p, err := follower.Query(ctx(), f)
			if err != nil {
				ferr = err
				return
			}
			followed = append(followed, p.Records...)
			f.After = p.Next
			if p.More {
				continue
			}
			if final {
				return
			}
			select {
			case <-done:
				final = true // one more poll after the last append
			default:
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var rs []audit.Record
				for i := range size {
					rs = append(rs, Rec(fmt.Sprintf("w%d-b%02d-%d", w, b, i), "booking.create", 0))
				}
				if err := replicas[w%len(replicas)].Append(ctx(), rs); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(done)
	fwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	if ferr != nil {
		t.Fatalf("follower: %v", ferr)
	}
	all := All(t, e.Open(), audit.Filter{})
	if len(all) != writers*batches*size {
		t.Fatalf("stored %d records; want %d", len(all), writers*batches*size)
	}
	if len(followed) != len(all) {
		t.Fatalf("the follower met %d records; want all %d", len(followed), len(all))
	}
	seen := map[string]bool{}
	for i, r := range followed {
		if seen[r.RequestID] {
			t.Fatalf("the follower met %s twice", r.RequestID)
		}
		seen[r.RequestID] = true
		if r.Seq != all[i].Seq {
			t.Fatalf("follower record %d has seq %d; want %d", i, r.Seq, all[i].Seq)
		}
	}
	// Each batch is contiguous and in order: one transaction.
	for i := 0; i < len(all); i += size {
		prefix := all[i].RequestID[:len(all[i].RequestID)-1]
		for j := range size {
			if want := fmt.Sprintf("%s%d", prefix, j); all[i+j].RequestID != want {
				t.Fatalf("record %d is %s; want %s (batches stay together in order)", i+j, all[i+j].RequestID, want)
			}
		}
	}
}

func testConcurrentDeletes(t *testing.T, e *Env) {
	replicas := []audit.Store{e.Open(), e.Open(), e.Open()}
	const old = 300
	var batch []audit.Record
	for i := range old {
		batch = append(batch, Rec(fmt.Sprintf("old%03d", i), "booking.create", -time.Hour))
	}
	mustAppend(t, replicas[0], batch...)
	mustAppend(t, replicas[1], Rec("live", "booking.create", 0))
	counts := make([]int64, len(replicas))
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, s := range replicas {
		wg.Go(func() { counts[i], errs[i] = s.DeleteBefore(ctx(), T0) })
	}
	wg.Wait()
	var total int64
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("DeleteBefore on replica %d: %v", i, errs[i])
		}
		total += counts[i]
	}
	if total != old {
		t.Fatalf("deletes on %d replicas removed %v, %d in all; want %d", len(replicas), counts, total, old)
	}
	wantRequests(t, "after concurrent deletes", All(t, replicas[2], audit.Filter{}), "live")
}

func testReopen(t *testing.T, e *Env) {
	s := e.Open()
	fixture(t, s)
	before := All(t, s, audit.Filter{})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	again := e.Open()
	if after := All(t, again, audit.Filter{}); !reflect.DeepEqual(after, before) {
		t.Fatalf("after reopening:\n got %+v\nwant %+v", after, before)
	}
	mustAppend(t, again, Rec("g", "x.y", 0))
	if all := All(t, again, audit.Filter{}); all[len(all)-1].Seq <= before[len(before)-1].Seq {
		t.Fatalf("seq after reopening %d; want more than %d", all[len(all)-1].Seq, before[len(before)-1].Seq)
	}
}

func testClosed(t *testing.T, e *Env) {
	s := e.Open()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Append(ctx(), []audit.Record{Rec("a", "x.y", 0)}); err == nil {
		t.Error("Append on a closed store succeeded")
	}
	if _, err := s.Query(ctx(), audit.Filter{}); err == nil {
		t.Error("Query on a closed store succeeded")
	}
	if _, err := s.DeleteBefore(ctx(), T0); err == nil {
		t.Error("DeleteBefore on a closed store succeeded")
	}
}
