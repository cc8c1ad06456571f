package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestDuplicateMembersRefusedFound(t *testing.T) {
	cases := []struct {
		in         string
		name, path string // "" name: none
	}{
		{`{}`, "", ""},
		{`{"a":1,"b":2}`, "", ""},
		{`{"a":1,"a":2}`, "a", "/a"},
		{` { "a" : 1 , "a" : 2 } `, "a", "/a"},
		{`{"a":{"b":1},"c":{"b":2}}`, "", ""}, // same name, different objects
		{`{"a":[{"x":1},{"x":2}]}`, "", ""},
		{`{"a":[{"x":1},{"y":1,"y":2}]}`, "y", "/a/1/y"},
		{`{"a":{"b":{"c":1,"c":2}}}`, "c", "/a/b/c"},
		{`{"a":{"b":1,"a":2},"b":3}`, "", ""},   // a nested name does not count in its parent
		{`{"a":"x\",\"a\":\"y","b":1}`, "", ""}, // quotes inside a string
		{`{"k":"{\"a\":1,\"a\":2}"}`, "", ""},   // JSON text inside a string value is a string
		{`{"\u0061":1,"a":2}`, "a", "/a"},       // an escape naming the same name
		{`{"a\/b":1,"a/b":2}`, "a/b", "/a~1b"},
		{`{"~":1,"~":2}`, "~", "/~0"},
		{`{"A":1,"a":2}`, "", ""}, // names are compared exactly
		{"{\"\xff\":1,\"\xfe\":2}", "\ufffd", "/\ufffd"},
		{`{"\ud800":1,"\udbff":2}`, "\ufffd", "/\ufffd"}, // lone surrogates decode alike
		{`{"":1,"":2}`, "", "/"},
		{`[1,{"a":1,"a":2}]`, "a", "/1/a"},
		{`{"a":1,"b":[[],[{"c":[0,{"d":1,"d":1}]}]]}`, "d", "/b/1/0/c/1/d"},
		{"{\"a\\u0007\":{\"x\":1,\"x\":1}}", "x", `/a\a/x`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			d := DuplicateMember([]byte(tc.in))
			switch {
			case d == nil && tc.path != "":
				t.Fatalf("no duplicate found, want %q at %s", tc.name, tc.path)
			case d != nil && tc.path == "":
				t.Fatalf("found %v, want none", d)
			case d != nil && (d.Name != tc.name || d.Path != tc.path):
				t.Fatalf("found %q at %s, want %q at %s", d.Name, d.Path, tc.name, tc.path)
			}
		})
	}
}

// TestDuplicateMembersRefusedLargeObject covers objects past the linear
// comparison: the duplicate is still found, and many distinct names are
// accepted.
func TestDuplicateMembersRefusedLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":{"v":1}`)
	}
	distinct := b.String() + "}"
	if d := DuplicateMember([]byte(distinct)); d != nil {
		t.Fatalf("distinct names: found %v", d)
	}
	dup := strings.TrimSuffix(distinct, "}") + `,"k\u0031\u0037":2}`
	d := DuplicateMember([]byte(dup))
	if d == nil || d.Name != "k17" || d.Path != "/k17" {
		t.Fatalf("got %v, want k17 at /k17", d)
	}
	early := strings.Replace(distinct, `"k3":`, `"k1":`, 1)
	if d := DuplicateMember([]byte(early)); d == nil || d.Path != "/k1" {
		t.Fatalf("got %v, want k1 at /k1", d)
	}
}

// TestDuplicateMembersRefusedBounded checks that a refusal quotes a bounded
// part of a huge name or path.
func TestDuplicateMembersRefusedBounded(t *testing.T) {
	long := strings.Repeat("é", 10_000)
	d := DuplicateMember([]byte(`{"` + long + `":1,"` + long + `":2}`))
	if d == nil {
		t.Fatal("no duplicate found")
	}
	if len(d.Name) > maxShownName+len("…") || len(d.Path) > maxShownPath+len("…") || !strings.HasSuffix(d.Name, "…") {
		t.Fatalf("name of %d bytes, path of %d bytes", len(d.Name), len(d.Path))
	}
	deep := strings.Repeat(`{"abcdefgh":`, 1000) + `{"x":1,"x":2}` + strings.Repeat("}", 1000)
	if d := DuplicateMember([]byte(deep)); d == nil || len(d.Path) > maxShownPath+len("…") || d.Name != "x" {
		t.Fatalf("deep: %v", d)
	}
	msg := (&DuplicateError{Name: "a\nb", Path: "/a"}).Error()
	if msg != `duplicate member "a\nb" at /a` {
		t.Fatalf("message %q", msg)
	}
}

func TestDuplicateMembersRefusedByValidateArgs(t *testing.T) {
	reg := New([]string{"booking"})
	if err := reg.Add(Capability{
		Name: "booking.cancel", Kind: Action, Pack: "booking", Plugin: "desk",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","maxLength":32},` +
			`"note":{"type":"object","properties":{"text":{"type":"string","maxLength":100}}}},"required":["id"]}`),
	}); err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup("booking.cancel")
	if err := e.ValidateArgs(json.RawMessage(`{"id":"bk_1","note":{"text":"ok"}}`)); err != nil {
		t.Fatalf("valid arguments refused: %v", err)
	}
	for raw, want := range map[string]string{
		`{"id":"bk_1","id":"bk_2"}`:                    `duplicate member "id" at /id`,
		`{"id":"bk_1","note":{"text":"a","text":"b"}}`: `duplicate member "text" at /note/text`,
	} {
		err := e.ValidateArgs(json.RawMessage(raw))
		var d *DuplicateError
		if !errors.As(err, &d) || err.Error() != want {
			t.Errorf("%s: got %v, want %s", raw, err, want)
		}
	}
	// Bytes that are not JSON are told so, not reported as duplicates.
	if err := e.ValidateArgs(json.RawMessage(`{"id":"a","id":`)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("malformed: %v", err)
	}
}

// refDuplicate is the reference the scanner must agree with: a walk of
// encoding/json's tokens, each object's names in a map. It returns the
// first duplicate's name and its path as segments.
func refDuplicate(raw []byte) (string, []string, bool) {
	type frame struct {
		object, started bool
		seen            map[string]bool
		name            string
		index           int
		wantName        bool
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var st []*frame
	valueStarts := func() {
		if len(st) == 0 {
			return
		}
		f := st[len(st)-1]
		if f.object {
			f.wantName = true
			return
		}
		if f.started {
			f.index++
		}
		f.started = true
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", nil, false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				valueStarts()
				st = append(st, &frame{object: t == '{', seen: map[string]bool{}, wantName: true})
			default:
				st = st[:len(st)-1]
			}
			continue
		case string:
			if len(st) > 0 && st[len(st)-1].object && st[len(st)-1].wantName {
				f := st[len(st)-1]
				f.name = t
				if f.seen[t] {
					var path []string
					for _, g := range st {
						if g.object {
							path = append(path, g.name)
						} else {
							path = append(path, strconv.Itoa(g.index))
						}
					}
					return t, path, true
				}
				f.seen[t], f.wantName = true, false
				continue
			}
		}
		valueStarts()
	}
}

// FuzzDuplicateMember checks that the scanner never panics, and that on
// valid JSON it finds exactly the duplicate the reference finds.
func FuzzDuplicateMember(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":[{"b":1},{"b":1,"b":2}]}`, `{"\u0061":1,"a":2}`, `[{"x":"}","x":"{"}]`,
		`{"a":"\"","b":{"c":[1,2,{"d":null}]}}`, "{\"\xff\":1,\"\xfe\":2}", `{"a~/":1,"a~/":2}`, `{"a":1`, `}}]]{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := DuplicateMember(raw)
		if !json.Valid(raw) {
			return
		}
		name, segs, found := refDuplicate(raw)
		if found != (d != nil) {
			t.Fatalf("%q: scanner %v, reference found=%v %q", raw, d, found, name)
		}
		if !found {
			return
		}
		var want []byte
		for _, s := range segs {
			want = appendSegment(want, s)
		}
		if len(name) <= maxShownName && d.Name != name {
			t.Fatalf("%q: name %q, reference %q", raw, d.Name, name)
		}
		if len(want) <= maxShownPath && d.Path != string(want) {
			t.Fatalf("%q: path %q, reference %q", raw, d.Path, want)
		}
	})
}

// typicalArgs is a 200-byte argument object, as an agent sends one.
const typicalArgs = `{"resource_id":"room-aurora","start":"2030-01-08T09:00:00Z","end":"2030-01-08T10:00:00Z",` +
	`"title":"Quarterly planning","attendees":["ana@example.com","bo@example.com"],"notify":true,"capacity":8}`

// BenchmarkDuplicateMember is the check every call pays.
func BenchmarkDuplicateMember(b *testing.B) {
	raw := []byte(typicalArgs)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if DuplicateMember(raw) != nil {
			b.Fatal("duplicate found")
		}
	}
}
