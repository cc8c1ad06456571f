package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/audit"
)

func TestRedact(t *testing.T) {
	paths := []audit.Path{{"password"}, {"card", "number"}, {"guests", "*", "phone"}, {"*", "token"}}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"top-level member", `{"user":"al","password":"hunter2"}`, `{"user":"al","password":"[redacted]"}`},
		{"any type of value", `{"password":{"a":[1,2]},"n":1}`, `{"password":"[redacted]","n":1}`},
		{"nested member", `{"card":{"number":"4111 1111","exp":"12/30"}}`, `{"card":{"number":"[redacted]","exp":"12/30"}}`},
		{"same name elsewhere is kept", `{"number":"4111","card":{"exp":"12/30"}}`, `{"number":"4111","card":{"exp":"12/30"}}`},
		{"every array element", `{"guests":[{"name":"a","phone":"+1"},{"phone":"+2"},7,"x"]}`, `{"guests":[{"name":"a","phone":"[redacted]"},{"phone":"[redacted]"},7,"x"]}`},
		{"wildcard member", `{"a":{"token":"t1"},"b":{"token":"t2","x":1},"token":"top"}`, `{"a":{"token":"[redacted]"},"b":{"token":"[redacted]","x":1},"token":"top"}`},
		{"duplicate members all redacted", `{"password":"a","password":"b"}`, `{"password":"[redacted]","password":"[redacted]"}`},
		{"any case, as the decoder matches", `{"Password":"x","CARD":{"Number":"4111"}}`, `{"Password":"[redacted]","CARD":{"Number":"[redacted]"}}`},
		{"Unicode folding too", `{"paſsword":"x"}`, `{"paſsword":"[redacted]"}`},
		{"order, numbers and text kept, space dropped", " {\"z\": 1.50, \"a\" : [1e3, -0, true, null], \"s\":\"<é>\\u00e9\"}\n", `{"z":1.50,"a":[1e3,-0,true,null],"s":"<é>é"}`},
		{"a scalar", `"just text"`, `"just text"`},
		{"an array at the root", `[{"password":"x"}]`, `[{"password":"x"}]`},
		{"empty", ``, ``},
		{"space", " \n", ``},
		{"invalid", `{"password":"x"`, `{"$audit":"invalid","bytes":15}`},
		{"trailing value", `{"a":1} {"b":2}`, `{"$audit":"invalid","bytes":15}`},
		{"trailing junk", `{"a":1}x`, `{"$audit":"invalid","bytes":8}`},
		{"not JSON", `password=x`, `{"$audit":"invalid","bytes":10}`},
		{"key not a string", `{1:2}`, `{"$audit":"invalid","bytes":5}`},
		{"mismatched close", `{"a":[1}`, `{"$audit":"invalid","bytes":8}`},
	} {
		got := audit.Redact(json.RawMessage(tc.in), paths, 0)
		if string(got) != tc.want {
			t.Errorf("%s: Redact(%s) = %s; want %s", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestRedactFollowsTheDecoder: whatever case a caller writes a sensitive
// member's name in, the value encoding/json would decode into the field
// (it matches names case-insensitively) is not in the redacted copy.
func TestRedactFollowsTheDecoder(t *testing.T) {
	type card struct {
		Number string `json:"number"`
	}
	type in struct {
		Password string `json:"password"`
		Card     card   `json:"card"`
	}
	paths := []audit.Path{{"password"}, {"card", "number"}}
	for _, args := range []string{
		`{"Password":"hunter2"}`, `{"PASSWORD":"hunter2"}`, `{"pAsSwOrD":"hunter2"}`,
		`{"paſsword":"hunter2"}`, `{"Pass\u0077ord":"hunter2"}`, `{"Card":{"NUMBER":"hunter2"}}`,
		`{"card":{"number":"x","numbeR":"hunter2"}}`,
	} {
		var raw in
		if err := json.Unmarshal([]byte(args), &raw); err != nil || (raw.Password != "hunter2" && raw.Card.Number != "hunter2") {
			t.Fatalf("%s: the decoder does not take the value (%v %+v); the case proves nothing", args, err, raw)
		}
		if audit.NamesNone([]byte(args), paths) {
			t.Errorf("NamesNone(%s) = true; the decoder finds a sensitive field in it", args)
		}
		out := audit.Redact(json.RawMessage(args), paths, 0)
		if bytes.Contains(out, []byte("hunter2")) {
			t.Errorf("Redact(%s) = %s; the value the plugin decodes as sensitive is in clear", args, out)
		}
	}
	// Names that only look alike are kept.
	if out := audit.Redact(json.RawMessage(`{"passwords":"x","word":"y"}`), paths, 0); string(out) != `{"passwords":"x","word":"y"}` {
		t.Errorf("Redact redacted more than the paths: %s", out)
	}
	if !audit.NamesNone([]byte(`{"passwords":"x","card":{"numbers":1}}`), paths) {
		t.Error("NamesNone is false for arguments with no sensitive name in any case")
	}
}

func TestRedactCap(t *testing.T) {
	in := json.RawMessage(`{"password":"` + strings.Repeat("p", 100) + `","note":"` + strings.Repeat("n", 40) + `"}`)
	// The size counts after redaction: the long password does not count.
	if got, want := audit.Redact(in, []audit.Path{{"password"}}, 75), `{"password":"[redacted]","note":"`+strings.Repeat("n", 40)+`"}`; string(got) != want {
		t.Fatalf("Redact within the cap = %s; want %s", got, want)
	}
	if got, want := audit.Redact(in, []audit.Path{{"password"}}, 74), `{"$audit":"truncated","bytes":75}`; string(got) != want {
		t.Fatalf("Redact over the cap = %s; want %s", got, want)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", audit.MaxArgs) + `"`)
	if got, want := audit.Redact(big, nil, 0), fmt.Sprintf(`{"$audit":"truncated","bytes":%d}`, len(big)); string(got) != want {
		t.Fatalf("Redact with the default cap = %s; want %s", got, want)
	}
	// An empty path redacts everything.
	if got := audit.Redact(json.RawMessage(`{"a":1}`), []audit.Path{{}}, 0); string(got) != `"[redacted]"` {
		t.Fatalf("Redact(root) = %s; want the marker", got)
	}
	if got := audit.Redact(json.RawMessage(`{"a":`), []audit.Path{{}}, 0); string(got) != `{"$audit":"invalid","bytes":5}` {
		t.Fatalf("Redact(root) of invalid JSON = %s; want the invalid placeholder", got)
	}
	// Deep nesting is refused, not a crash.
	nest := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"a":[`, n) + strings.Repeat("]}", n))
	}
	if got := audit.Redact(nest(audit.MaxDepth/2), nil, 1<<20); isPlaceholder(got) {
		t.Fatalf("Redact(%d levels) = %.40s; want it copied", audit.MaxDepth, got)
	}
	// Brackets inside strings are not nesting.
	if got := audit.Redact(json.RawMessage(`{"a":"`+strings.Repeat("[{", audit.MaxDepth)+`"}`), nil, 1<<20); isPlaceholder(got) {
		t.Fatalf("Redact of brackets in a string = %.40s; want it copied", got)
	}
	deep := nest(audit.MaxDepth/2 + 1)
	if got, want := audit.Redact(deep, nil, 1<<20), fmt.Sprintf(`{"$audit":"too_deep","bytes":%d}`, len(deep)); string(got) != want {
		t.Fatalf("Redact(%d levels) = %.40s; want %s", audit.MaxDepth+2, got, want)
	}
}

var fuzzPaths = []audit.Path{{"password"}, {"list", "*", "token"}, {"*", "secret"}}

// FuzzRedact: whatever the input, the result is valid JSON (or empty)
// within the cap, equals the input with exactly the sensitive values
// replaced, and never holds a value placed at a sensitive path.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		`{"password":"x","list":[{"token":"t"},{"b":1}],"a":{"secret":2}}`,
		`[1,2,{"password":null}]`, `"s"`, `{"a":`, `{}`, ``, `{"list":{"x":{"token":1}}}`,
		"{\"p\xffassword\":\"\xfe\"}", `{"password":"a","password":{"b":[1]}}`, `1e400`, `[[[[]]]]`,
		`{"user":"x","n":[1,{"m":"secret"}]}`, `{"pass\u0077ord":"x"}`, `{"list":[{"tok":"token"}]}`,
	} {
		f.Add([]byte(s), "hunterTwo")
	}
	f.Fuzz(func(t *testing.T, args []byte, secret string) {
		out := audit.Redact(args, fuzzPaths, 0)
		checkValid(t, args, out)
		// The result is the input with the sensitive values replaced.
		var in any
		if err := unmarshalOne(args, &in); err == nil && !isPlaceholder(out) {
			want, _ := json.Marshal(refRedact(in, fuzzPaths, 0))
			var got any
			if err := unmarshalOne(out, &got); err != nil {
				t.Fatalf("Redact(%q) = %q, which does not decode: %v", args, out, err)
			}
			if g, _ := json.Marshal(got); !bytes.Equal(g, want) {
				t.Fatalf("Redact(%q) = %s; want %s", args, g, want)
			}
		}
		// A secret at each sensitive path never comes out.
		sec, _ := json.Marshal(secret)
		other := json.RawMessage("null")
		if json.Valid(args) {
			other = args
		}
		doc := fmt.Sprintf(`{"password":%s,"list":[{"token":%s}],"o":{"secret":%s},"other":%s}`, sec, sec, sec, other)
		out = audit.Redact(json.RawMessage(doc), fuzzPaths, 1<<20)
		checkValid(t, []byte(doc), out)
		var got struct {
			Password any
			List     []struct{ Token any }
			O        struct{ Secret any }
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("Redact(%s) = %s, which does not decode: %v", doc, out, err)
		}
		if got.Password != audit.RedactedMarker || len(got.List) != 1 || got.List[0].Token != audit.RedactedMarker || got.O.Secret != audit.RedactedMarker {
			t.Fatalf("Redact(%s) = %s; a sensitive value survived", doc, out)
		}
		if plain(secret) && !bytes.Contains(args, []byte(secret)) && bytes.Contains(out, []byte(secret)) {
			t.Fatalf("Redact(%s) = %s; it holds the secret %q", doc, out, secret)
		}
	})
}

func checkValid(t *testing.T, in, out []byte) {
	t.Helper()
	if len(bytes.TrimSpace(in)) == 0 {
		if out != nil {
			t.Fatalf("Redact(%q) = %q; want nothing", in, out)
		}
		return
	}
	if !json.Valid(out) || !utf8.Valid(out) {
		t.Fatalf("Redact(%q) = %q; not valid JSON", in, out)
	}
	if len(out) > audit.MaxArgs && len(out) > 1<<20 {
		t.Fatalf("Redact(%q) is %d bytes; over its cap", in, len(out))
	}
}

// plain reports whether s is a word no placeholder or marker holds.
func plain(s string) bool {
	if len(s) < 6 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	for _, w := range []string{"redacted", "password", "secret", "truncated", "invalid", "bytes", "token", "other", "audit"} {
		if strings.Contains(w, s) {
			return false
		}
	}
	return true
}

func isPlaceholder(b []byte) bool { return bytes.HasPrefix(b, []byte(`{"$audit":`)) }

// unmarshalOne decodes exactly one JSON value, numbers as written.
func unmarshalOne(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("more than one value")
	}
	return nil
}

// refRedact is Redact on a decoded value, for comparison.
func refRedact(v any, paths []audit.Path, depth int) any {
	sub := func(name string, child any) any {
		var next []audit.Path
		for _, p := range paths {
			if strings.EqualFold(p[depth], name) || p[depth] == "*" {
				if len(p) == depth+1 {
					return audit.RedactedMarker
				}
				next = append(next, p)
			}
		}
		return refRedact(child, next, depth+1)
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			x[k] = sub(k, c)
		}
	case []any:
		for i, c := range x {
			x[i] = sub("*", c)
		}
	}
	return v
}
