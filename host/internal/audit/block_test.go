package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlmigrate"
)

func blockRecords() []Record {
	t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	rs := []Record{
		{Seq: 7, ID: "01J", Time: t0.Add(time.Minute), RequestID: "r1", Protocol: "mcp", ProtocolVersion: "2025-11-25",
			TokenLabel: "ci", Role: "customer", Scope: "action", UserID: "alice", Capability: "booking.create", Plugin: "booking",
			Args: []byte(`{"a":1}`), Decision: Admitted, Outcome: OutcomeToolError, ErrorCode: "conflict", Latency: 3 * time.Millisecond},
		{Seq: 8, ID: "01K", ParentID: "01J", Time: t0, RequestID: "r1", Capability: "platform.search",
			Decision: Refused, Step: "permission", Reason: "needs search.read — ünïcode"},
		{Seq: 12, ID: "01L", Time: t0.Add(-time.Hour), Capability: "x.y", Decision: Admitted, Outcome: OutcomeInternalError, ErrorRef: "01L", ApprovalID: "ap_x"},
	}
	return rs
}

func TestBlockRoundTrip(t *testing.T) {
	rs := blockRecords()
	b := encodeBlock(rs)
	if b.first != 7 || b.last != 12 || b.count != 3 || !b.minTime.Equal(rs[2].Time) || !b.maxTime.Equal(rs[0].Time) {
		t.Fatalf("block span = seqs %d..%d, %d records, times %v..%v", b.first, b.last, b.count, b.minTime, b.maxTime)
	}
	got, err := decodeBlock(b.first, b.body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rs) {
		t.Fatalf("decoded\n %+v\nwant\n %+v", got, rs)
	}
	for _, want := range []string{needle(keyToken, "ci"), needle(keyUser, "alice"), needle(keyCapability, "platform.search"),
		needle(keyRequest, "r1"), needle(keyDecision, "refused"), needle(keyStep, "permission")} {
		if !strings.Contains(b.keys, want) {
			t.Errorf("keys %q lack %q", b.keys, want)
		}
	}
	if strings.Count(b.keys, needle(keyToken, "ci")) != 1 || strings.Count(b.keys, needle(keyDecision, "admitted")) != 1 {
		t.Errorf("keys %q repeat a value", b.keys)
	}
	if strings.Contains(b.keys, needle(keyUser, "")) {
		t.Errorf("keys %q hold an empty value", b.keys)
	}
}

// TestBlockRepeatsAreShort: a record repeating the previous one's values
// but for its ID and time costs a few bytes of each.
func TestBlockRepeatsAreShort(t *testing.T) {
	one := blockRecords()[:1]
	single := len(encodeBlock(one).body)
	var rs []Record
	for i := range 100 {
		r := one[0]
		r.Seq, r.ID, r.Time = int64(i+1), fmt.Sprintf("01J%023d", i), r.Time.Add(time.Duration(i)*time.Millisecond)
		rs = append(rs, r)
	}
	b := encodeBlock(rs)
	// Its seq delta (1 byte), time step (2), latency (4), mask (1) and ID
	// step (2).
	if perRecord := (len(b.body) - single) / 99; perRecord > 12 {
		t.Fatalf("a repeating record takes %d bytes, the first %d; want at most 12", perRecord, single)
	}
	got, err := decodeBlock(1, b.body)
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("decoded %d records, %v; want the %d encoded", len(got), err, len(rs))
	}
}

// TestDecodeBlockRefusesCorruption: every cut and every flipped layout
// byte is an error naming the block, never a panic or a silent record.
func TestDecodeBlockRefusesCorruption(t *testing.T) {
	b := encodeBlock(blockRecords())
	for n := range len(b.body) {
		if _, err := decodeBlock(7, b.body[:n]); !errors.Is(err, errCorrupt) {
			// A cut between two records decodes to the records before it.
			if rs, _ := decodeBlock(7, b.body[:n]); len(rs) == 0 || len(rs) == 3 {
				t.Fatalf("body cut at %d of %d: %v", n, len(b.body), err)
			}
		}
	}
	bad := append([]byte{blockVersion + 1}, b.body[1:]...)
	if _, err := decodeBlock(7, bad); !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "seq 7") {
		t.Fatalf("unknown layout: %v", err)
	}
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		// Seqs must increase: two records at delta 0 (seq, time, latency,
		// mask: nothing differs from the empty record before).
		{"repeated seq", []byte{blockVersion, 0, 0, 0, 0, 0, 0, 0, 0}, "out of order"},
		{"unknown mask bit", append([]byte{blockVersion, 0, 0, 0}, binary.AppendUvarint(nil, maskAll+1)...), "unknown mask"},
		{"ID both stepped and written", []byte{blockVersion, 0, 0, 0, byte(maskIDStep | fieldBit(0)), 0, 0, 0}, "unknown mask"},
		{"ID step from no ID", []byte{blockVersion, 0, 0, 0, maskIDStep, 2, 2}, "from no ID"},
		{"field past the end", []byte{blockVersion, 0, 0, 0, byte(fieldBit(2)), 5, 'r'}, "past the end"},
		// Layout 2: the first record has no previous one to repeat.
		{"layout 2 first record repeating", append([]byte{2, 0, 0, 0}, make([]byte, numFields+1)...), "repeats a value"},
		{"layout 2 repeated seq", append(append([]byte{2}, layoutTwoEmpty(0)...), layoutTwoEmpty(0)...), "out of order"},
	} {
		if _, err := decodeBlock(1, c.body); !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want corrupt, %q", c.name, err, c.want)
		}
	}
	if rs, err := decodeBlock(1, []byte{blockVersion, 0, 0, 0, 0}); err != nil || len(rs) != 1 || !reflect.DeepEqual(rs[0], Record{Seq: 1, Time: time.UnixMicro(0).UTC()}) {
		t.Fatalf("one empty record: %+v, %v", rs, err)
	}
	if rs, err := decodeBlock(1, append([]byte{2}, layoutTwoEmpty(0)...)); err != nil || len(rs) != 1 {
		t.Fatalf("layout 2, one empty record: %v, %v", rs, err)
	}
}

// layoutTwoEmpty is a layout 2 record at seq delta delta whose fields are
// all empty.
func layoutTwoEmpty(delta byte) []byte {
	return append([]byte{delta, 0, 0}, bytes.Repeat([]byte{1}, numFields+1)...)
}

// TestDecodeLayoutTwo: blocks written before layout 3 still decode.
func TestDecodeLayoutTwo(t *testing.T) {
	// Two records: the first names every field "v", the second repeats
	// them all but its ID; Args {} then repeated.
	var body []byte
	body = append(body, 2, 0, 2, 5) // layout 2; seq delta 0, time 1 µs, latency 5
	for range numFields {
		body = append(body, 2, 'v')
	}
	body = append(body, 3, '{', '}')
	body = append(body, 1, 4, 6, 2, 'w') // seq delta 1, time 2 µs, latency 6, ID "w"
	body = append(body, make([]byte, numFields)...)
	rs, err := decodeBlock(10, body)
	if err != nil || len(rs) != 2 {
		t.Fatalf("layout 2: %v, %v", rs, err)
	}
	for i, r := range rs {
		if r.ErrorRef != "v" || r.ApprovalID != "v" || string(r.Args) != "{}" || r.Seq != int64(10+i) || !r.Time.Equal(time.UnixMicro(int64(i+1))) {
			t.Errorf("layout 2 record %+v", r)
		}
	}
	if rs[0].ID != "v" || rs[1].ID != "w" || rs[1].Latency != 6 {
		t.Errorf("records %+v", rs)
	}
}

// TestBlockIDSteps: IDs of NewID's form are kept exactly as steps from
// the previous record's, whichever way they go; any other ID as it is.
func TestBlockIDSteps(t *testing.T) {
	t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	// Made here rather than by NewID, whose clock would then stay in 2030
	// for the package's other tests.
	a, b := encodeID(uint64(t0.UnixMilli()), 42, 1000), encodeID(uint64(t0.UnixMilli())+1000, 42, 1001)
	ids := []string{b, a, "not-an-id", a, a, encodeID(1<<48-1, 7, 1<<64-1), encodeID(0, 7, 0), encodeID(0, 8, 0),
		strings.ToLower(b), "8" + b[1:], b, ""}
	var rs []Record
	for i, id := range ids {
		rs = append(rs, Record{Seq: int64(i + 1), ID: id, Time: t0, Capability: "c", Decision: Admitted, Outcome: OutcomeOK})
	}
	got, err := decodeBlock(1, encodeBlock(rs).body)
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, rs)
	}
}

// TestParseID: parseID reads what encodeID writes, and nothing else.
func TestParseID(t *testing.T) {
	for _, p := range []idParts{{0, 0, 0, true}, {1<<48 - 1, 1<<64 - 1, 1<<16 - 1, true}, {12345, 678, 9, true}} {
		s := encodeID(p.ms, p.hi, p.lo)
		if got := parseID(s); got != p {
			t.Errorf("parseID(%s) = %+v; want %+v", s, got, p)
		}
	}
	id := NewID(time.Now())
	for _, s := range []string{"", id[1:], id + "0", strings.ToLower(id), "8" + id[1:], id[:5] + "I" + id[6:], id[:5] + "U" + id[6:]} {
		if p := parseID(s); p.ok {
			t.Errorf("parseID(%q) = %+v; want not an ID", s, p)
		}
	}
}

// TestDecodeLayoutOne: blocks written before records had an approval id
// (17 fields) still decode, and give records without one.
func TestDecodeLayoutOne(t *testing.T) {
	// Two records: the first names every field "v", the second repeats
	// them all; Args {} then repeated.
	var body []byte
	body = append(body, 1, 0, 2, 5) // layout 1; seq delta 0, time 1 µs, latency 5
	for range 17 {
		body = append(body, 2, 'v')
	}
	body = append(body, 3, '{', '}')
	body = append(body, 1, 4, 6) // seq delta 1, time 2 µs, latency 6
	body = append(body, make([]byte, 18)...)
	rs, err := decodeBlock(10, body)
	if err != nil || len(rs) != 2 {
		t.Fatalf("layout 1: %v, %v", rs, err)
	}
	for _, r := range rs {
		if r.ID != "v" || r.ErrorRef != "v" || r.ApprovalID != "" || string(r.Args) != "{}" {
			t.Errorf("layout 1 record %+v", r)
		}
	}
	if rs[1].Seq != 11 || rs[1].Latency != 6 {
		t.Errorf("second record %+v", rs[1])
	}
}

func FuzzDecodeBlock(f *testing.F) {
	f.Add(encodeBlock(blockRecords()).body)
	f.Add([]byte{blockVersion})
	f.Add([]byte{blockVersion, 0, 0, 0, 200})
	t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	ms := uint64(t0.UnixMilli())
	f.Add(encodeBlock([]Record{{Seq: 1, ID: encodeID(ms, 1, 5), Time: t0}, {Seq: 2, ID: encodeID(ms, 1, 6), Time: t0, RequestID: "r"}}).body)
	f.Add(append([]byte{2}, layoutTwoEmpty(0)...))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, err := decodeBlock(1, body)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("error %v is not errCorrupt", err)
			}
			return
		}
		// What decodes encodes to the same records.
		again, err := decodeBlock(1, encodeBlock(rs).body)
		if err != nil || !reflect.DeepEqual(again, rs) {
			t.Fatalf("re-encoded block: %v\n got %+v\nwant %+v", err, again, rs)
		}
	})
}

// TestCorruptBlockIsAQueryError: a block that does not decode fails the
// query that reads it, saying where.
func TestCorruptBlockIsAQueryError(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(t.Context(), []Record{{Capability: "a.b", Decision: Admitted, Outcome: OutcomeOK}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.(*sqlStore).db.Exec(`UPDATE audit_blocks SET body = x'01ff'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Query(t.Context(), Filter{}); !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "at seq 1") {
		t.Fatalf("Query over a corrupt block = %v; want errCorrupt at seq 1", err)
	}
}

// TestLegacyRecordsConvert: records written under the first schema, a row
// each, are in blocks after opening, with their seqs; seqs go on past the
// highest ever handed out, and the old table is gone.
func TestLegacyRecordsConvert(t *testing.T) {
	for _, engine := range []struct {
		name string
		d    sqlmigrate.Dialect
		open func(t *testing.T) (raw *sql.DB, reopen func() (Store, error))
	}{
		{"sqlite", sqlmigrate.SQLite, func(t *testing.T) (*sql.DB, func() (Store, error)) {
			path := filepath.Join(t.TempDir(), FileName)
			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			return raw, func() (Store, error) { return OpenSQLite(context.Background(), path) }
		}},
		{"postgres", sqlmigrate.Postgres, func(t *testing.T) (*sql.DB, func() (Store, error)) {
			dsn := pgtest.SchemaDSN(t)
			raw, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			return raw, func() (Store, error) { return OpenPostgres(context.Background(), dsn) }
		}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			raw, reopen := engine.open(t)
			defer raw.Close()
			sub, err := fs.Sub(migrationFiles, "migrations")
			if err != nil {
				t.Fatal(err)
			}
			ms, err := sqlmigrate.LoadDialect(sub, engine.d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sqlmigrate.Apply(t.Context(), raw, engine.d, ms[:1], sqlmigrate.WithTable(HistoryTable)); err != nil {
				t.Fatal(err)
			}
			d := sqliteDialect
			if engine.d == sqlmigrate.Postgres {
				d = postgresDialect
			}
			// 1,200 rows: more than two blocks; then the newest ten
			// deleted, so the highest seq handed out is no row's.
			const rows = 1200
			t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
			tx, err := raw.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for i := range rows {
				if _, err := tx.Exec(`INSERT INTO audit_records (id, parent_id, time, request_id, protocol, protocol_version, token_label,
					role, scope, user_id, capability, plugin, args, decision, step, reason, outcome, error_code, error_ref, latency_ns)
					VALUES ($1, '', $2, $3, 'mcp', '2025-11-25', 'ci', 'customer', 'action', 'alice', 'booking.create', 'booking',
					'{"i":1}', 'admitted', '', '', 'ok', '', '', 5)`,
					fmt.Sprintf("id%04d", i), d.time(t0.Add(time.Duration(i)*time.Second)), fmt.Sprintf("r%04d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tx.Exec(`DELETE FROM audit_records WHERE request_id >= 'r1190'`); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			s, err := reopen()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var all []Record
			for f := (Filter{Order: OldestFirst, Limit: MaxLimit}); ; {
				p, err := s.Query(t.Context(), f)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, p.Records...)
				if !p.More {
					break
				}
				f.After = p.Next
			}
			if len(all) != rows-10 {
				t.Fatalf("%d records after converting; want %d", len(all), rows-10)
			}
			for i, r := range all {
				want := Record{Seq: int64(i + 1), ID: fmt.Sprintf("id%04d", i), Time: t0.Add(time.Duration(i) * time.Second),
					RequestID: fmt.Sprintf("r%04d", i), Protocol: "mcp", ProtocolVersion: "2025-11-25", TokenLabel: "ci",
					Role: "customer", Scope: "action", UserID: "alice", Capability: "booking.create", Plugin: "booking",
					Args: []byte(`{"i":1}`), Decision: Admitted, Outcome: OutcomeOK, Latency: 5}
				if !reflect.DeepEqual(r, want) {
					t.Fatalf("record %d:\n got %+v\nwant %+v", i, r, want)
				}
			}
			if err := s.Append(t.Context(), []Record{{RequestID: "new", Capability: "a.b", Decision: Admitted, Outcome: OutcomeOK}}); err != nil {
				t.Fatal(err)
			}
			p, err := s.Query(t.Context(), Filter{RequestID: "new"})
			if err != nil || len(p.Records) != 1 || p.Records[0].Seq != rows+1 {
				t.Fatalf("new record: %+v, %v; want seq %d", p.Records, err, rows+1)
			}
			var exists bool
			if err := raw.QueryRow(d.legacyExists).Scan(&exists); err != nil || exists {
				t.Fatalf("old table still there (%v, %v)", exists, err)
			}
		})
	}
}
