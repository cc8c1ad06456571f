package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		``, ` `, `{}`, `[]`, `[1,2]`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`,
		`"x"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"\/"`, `"abc`, "\"a\tb\"", `"a\"`,
		`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-3`, `2.`,
		`true`, `tru`, `false`, `fals`, `null`, `nul`, `nulll`,
		`{"a":[{"b":null}],"c":"d"}`, `{"a":1}}`, `[[[]]]`, `[[[]]`, " {\"a\" : 1 } ",
		"\"\xff\xfe\"", `{"a":1,"a":2}`, "[\n1\r,\t2]",
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	}
	for _, c := range cases {
		name := c
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(name, func(t *testing.T) {
			if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
				t.Fatalf("validJSON(%q) = %v, json.Valid = %v", c, got, want)
			}
		})
	}
}

func TestObjectIter(t *testing.T) {
	cases := []struct {
		in   string
		keys []string
		bad  bool
	}{
		{`{}`, nil, false},
		{`{ }`, nil, false},
		{`{"a":1,"b":[2],"c":{"d":3}}`, []string{`"a"`, `"b"`, `"c"`}, false},
		{`{"a":1`, []string{}, true},
		{`{"a":1,}`, []string{`"a"`}, true},
		{`{"a" 1}`, nil, true},
		{`{} x`, nil, true},
		{`{"a":1} x`, []string{`"a"`}, true},
		{`{"a":1;"b":2}`, nil, true},
		{`[]`, nil, true},
		{`{`, nil, true},
		{`{1:2}`, nil, true},
		{`{"a\q":1}`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			it := iterObject([]byte(tc.in), 0)
			var m member
			var keys []string
			for it.next(&m) {
				keys = append(keys, string(m.key))
			}
			if it.bad != tc.bad {
				t.Fatalf("bad = %v, want %v", it.bad, tc.bad)
			}
			if !tc.bad && strings.Join(keys, ",") != strings.Join(tc.keys, ",") {
				t.Fatalf("keys = %v, want %v", keys, tc.keys)
			}
		})
	}
}

func TestStringHelpers(t *testing.T) {
	cases := []struct {
		token string
		want  string
		ok    bool
	}{
		{`"plain"`, "plain", true},
		{`"a\nb"`, "a\nb", true},
		{`"\u0074ools/call"`, "tools/call", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`""`, "", true},
		{`x`, "", false},
		{`"`, "", false},
		{`"\z"`, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.token, func(t *testing.T) {
			got, ok := decodeString([]byte(tc.token))
			if ok != tc.ok || got != tc.want {
				t.Fatalf("decodeString = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
			if tc.ok && !stringIs([]byte(tc.token), tc.want) {
				t.Fatalf("stringIs(%s, %q) = false", tc.token, tc.want)
			}
			if stringIs([]byte(tc.token), tc.want+"x") {
				t.Fatalf("stringIs matched a longer string")
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	cases := []string{
		"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f",
		"é ü 世界 😀", "bad \xff\xfe utf8", "truncated \xe4\xb8", "surrogate \xed\xa0\x80",
		"overlong \xc0\xaf", "line\u2028sep\u2029", "<html>&amp;", "max \U0010ffff", "above \xf4\x90\x80\x80",
	}
	for _, c := range cases {
		t.Run(c, func(t *testing.T) {
			for _, out := range [][]byte{appendString(nil, c), appendString(nil, []byte(c))} {
				if !json.Valid(out) || !utf8.Valid(out) {
					t.Fatalf("appendString(%q) = %s: not valid UTF-8 JSON", c, out)
				}
				var back string
				if err := json.Unmarshal(out, &back); err != nil {
					t.Fatal(err)
				}
				if want := strings.ToValidUTF8(c, "\uFFFD"); utf8.ValidString(c) && back != want {
					t.Fatalf("round trip = %q, want %q", back, want)
				}
				if !utf8.ValidString(c) && back != replaceInvalid(c) {
					t.Fatalf("round trip = %q, want %q", back, replaceInvalid(c))
				}
			}
		})
	}
}

// replaceInvalid replaces each invalid byte (not each run) by U+FFFD, the
// way appendString and encoding/json do.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func TestDecodeRuneMatchesUTF8(t *testing.T) {
	// Every 1-, 2- and 3-byte prefix, and a sweep of 4-byte leads.
	check := func(b []byte) {
		r1, n1 := decodeRune(b)
		r2, n2 := utf8.DecodeRune(b)
		s1, sn := decodeRune(string(b))
		if r1 != r2 || n1 != n2 || s1 != r2 || sn != n2 {
			t.Fatalf("decodeRune(% x) = %U/%d, utf8 = %U/%d", b, r1, n1, r2, n2)
		}
	}
	check(nil)
	for a := 0; a < 256; a++ {
		check([]byte{byte(a)})
		for b := 0; b < 256; b++ {
			check([]byte{byte(a), byte(b)})
			check([]byte{byte(a), byte(b), 0x80})
			check([]byte{byte(a), byte(b), 0x80, 0x80})
			check([]byte{byte(a), byte(b), 0xbf, 0x41})
		}
	}
}

func TestAcceptsAndRefused(t *testing.T) {
	cases := []struct {
		params string
		want   bool
	}{
		{"", false}, {"q=0", true}, {" q = 0 ", true}, {"q=0.0", true}, {"q=0.001", false},
		{"q=1", false}, {"charset=utf-8", false}, {"charset=utf-8; q=0", true}, {"q", false}, {"q=", false},
	}
	for _, tc := range cases {
		if got := refused(tc.params); got != tc.want {
			t.Errorf("refused(%q) = %v, want %v", tc.params, got, tc.want)
		}
	}
}

func TestDecodeHeaderValue(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"plain", "plain", true},
		{"=?base64?" + b64("héllo") + "?=", "héllo", true},
		{"=?base64?not base64?=", "", false},
		{"=?base64?unterminated", "=?base64?unterminated", true},
		{"=?BASE64?" + b64("x") + "?=", "=?BASE64?" + b64("x") + "?=", true},
	}
	for _, tc := range cases {
		got, ok := decodeHeaderValue(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("decodeHeaderValue(%q) = %q, %v", tc.in, got, ok)
		}
	}
}

func TestVersionNames(t *testing.T) {
	for _, v := range SupportedVersions() {
		if parseVersion(v).String() != v {
			t.Errorf("round trip of %s", v)
		}
	}
	if parseVersion("2024-11-05") != 0 || version(0).String() != "unknown" || version(99).String() != "unknown" {
		t.Error("unknown versions must stay unknown")
	}
}
