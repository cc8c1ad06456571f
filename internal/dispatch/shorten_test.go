package dispatch

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShorten(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct{ in, want string }{
		{"short", "short"},
		{`maxLength: "` + long + `" contains 100 Unicode code points, more than 10`,
			`maxLength: "` + long[:64] + `…" contains 100 Unicode code points, more than 10`},
		{`a "q\"uoted" value and more text to pass the quote bound of sixty-four bytes`, `a "q\"uoted" value and more text to pass the quote bound of sixty-four bytes`},
		{`unterminated "` + long, `unterminated "` + long[:64] + `…`},
		{`trailing quote "`, `trailing quote "`},
	} {
		if got := shorten(tc.in); got != tc.want {
			t.Errorf("shorten(%.40q…)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func FuzzShorten(f *testing.F) {
	f.Add(`maxLength: "abc" contains 3`)
	f.Add(`"\`)
	f.Add(strings.Repeat(`"é`, 400))
	f.Fuzz(func(t *testing.T, s string) {
		got := shorten(s)
		if len(got) > maxReasonBytes+len("… (cut)") {
			t.Fatalf("%d bytes", len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("split a character: %q", got)
		}
	})
}
