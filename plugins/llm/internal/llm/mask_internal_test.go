package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

const maskKey = "sk-proj-Q7vX2mLp9RtZ4wYb8NcK1dHf6JsGa3Ue" // 40 characters

// leakedRuns lists, for each form of secret, the runLen-runs of it that
// occur in s, counting only what is outside the markers. It is a brute
// force check written apart from the masker: substring search of every
// case-folded window, and the same with separators dropped.
func leakedRuns(secret, s string) []string {
	var leaks []string
	for piece := range strings.SplitSeq(s, redacted) {
		raw := strings.Map(fold, piece)
		split := strings.Map(func(r rune) rune {
			if isSeparator(r) {
				return -1
			}
			return r
		}, raw)
		for _, f := range forms(secret) {
			f = strings.Map(fold, f)
			fr := []rune(f)
			fs := []rune(strings.Map(func(r rune) rune {
				if isSeparator(r) {
					return -1
				}
				return r
			}, f))
			for i := 0; i+runLen <= len(fr); i++ {
				if w := string(fr[i : i+runLen]); strings.Contains(raw, w) {
					leaks = append(leaks, w)
				}
			}
			for i := 0; i+runLen <= len(fs); i++ {
				if w := string(fs[i : i+runLen]); strings.Contains(split, w) {
					leaks = append(leaks, w)
				}
			}
		}
	}
	return leaks
}

func TestMaskForms(t *testing.T) {
	m := newMasker(maskKey)
	std := base64.StdEncoding.EncodeToString([]byte(maskKey))
	spaced := strings.Join(strings.Split(maskKey, ""), " ")
	for _, tc := range []struct{ name, in, want string }{
		{"the key", "key " + maskKey + " end", "key [redacted] end"},
		{"36 of its 40 characters", "got '" + maskKey[2:38] + "'", "got '[redacted]'"},
		{"eight characters", "a " + maskKey[10:18] + " b", "a [redacted] b"},
		{"seven characters stay", "a " + maskKey[10:17] + " b", "a " + maskKey[10:17] + " b"},
		{"upper-cased", "K=" + strings.ToUpper(maskKey) + ".", "K=[redacted]."},
		{"lower-cased part", "K=" + strings.ToLower(maskKey[5:30]) + ".", "K=[redacted]."},
		{"base64, padded", "b64 " + std + " done", "b64 [redacted] done"},
		{"base64 URL, unpadded", "b64 " + base64.RawURLEncoding.EncodeToString([]byte(maskKey)) + " done", "b64 [redacted] done"},
		{"spaced out", "it is " + spaced + " ok", "it is [redacted] ok"},
		{"one per line", "it is\n" + strings.Join(strings.Split(maskKey, ""), "\n") + "\nok", "it is\n[redacted]\nok"},
		{"zero-width spaces", "x " + strings.Join(strings.Split(maskKey[4:20], ""), "\u200b") + " y", "x [redacted] y"},
		{"line breaks kept around it", "a\n\n" + maskKey + "\n\nb", "a\n\n[redacted]\n\nb"},
		{"nothing of it", "Aurora room has a projector [1].", "Aurora room has a projector [1]."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m.mask(tc.in)
			if got != tc.want {
				t.Errorf("mask(%q)\n = %q\nwant %q", tc.in, got, tc.want)
			}
			if l := leakedRuns(maskKey, got); len(l) > 0 {
				t.Errorf("runs of the key left: %q", l)
			}
		})
	}
}

// Base64 of a longer text holding the key encodes it at any alignment.
func TestMaskBase64AtEveryAlignment(t *testing.T) {
	m := newMasker(maskKey)
	for _, prefix := range []string{"", "x", "xy", "Bearer ", "user:"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			in := enc.EncodeToString([]byte(prefix + maskKey + " and more"))
			got := m.mask(in)
			if !strings.Contains(got, redacted) {
				t.Errorf("prefix %q: %q not masked", prefix, in)
			}
			if l := leakedRuns(maskKey, got); len(l) > 0 {
				t.Errorf("prefix %q: runs left in %q: %q", prefix, got, l)
			}
		}
	}
}

func TestMaskShortAndEmptySecrets(t *testing.T) {
	if got := newMasker("", "").mask("nothing " + maskKey); got != "nothing "+maskKey {
		t.Errorf("an empty secret masked %q", got)
	}
	var nilMasker *masker
	if got := nilMasker.mask("text"); got != "text" {
		t.Errorf("nil masker: %q", got)
	}
	m := newMasker("Ab3$x")
	if got := m.mask("one ab3$X two Ab3$x three Ab3"); got != "one [redacted] two [redacted] three Ab3" {
		t.Errorf("short secret: %q", got)
	}
}

// The secrets are every connection's key and the base_url credentials;
// a short user name is no secret.
func TestConnectionSecrets(t *testing.T) {
	got := connectionSecrets([]Connection{
		{APIKey: "key-one-0123456789"},
		{BaseURL: "https://admin:pa55-w0rd-XYZ@h/v1"},
		{BaseURL: "https://ghp_tokenAsUserName0123@h/v1", APIKey: "key-two-0123456789"},
	})
	want := []string{"key-one-0123456789", "", "pa55-w0rd-XYZ", "key-two-0123456789", "ghp_tokenAsUserName0123"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("connectionSecrets = %q, want %q", got, want)
	}
}

// Every log line through the masking handler is masked: message, text
// attributes, errors, groups and attributes bound with With.
func TestMaskingLogger(t *testing.T) {
	var buf bytes.Buffer
	log := maskingLogger(slog.New(slog.NewTextHandler(&buf, nil)), newMasker(maskKey))
	log = log.With("bound", "b:"+maskKey)
	log.WarnContext(context.Background(), "msg "+strings.ToUpper(maskKey),
		"s", maskKey[1:30], "err", errors.New("e "+maskKey), slog.Group("g", "inner", maskKey), "n", 42)
	out := buf.String()
	if l := leakedRuns(maskKey, out); len(l) > 0 {
		t.Errorf("log leaks %q: %s", l, out)
	}
	for _, want := range []string{`msg="msg [redacted]"`, "s=[redacted]", `err="e [redacted]"`, "g.inner=[redacted]", "n=42", "bound=b:[redacted]"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s: %s", want, out)
		}
	}
}

// A large answer is masked in one pass.
func TestMaskLargeText(t *testing.T) {
	m := newMasker(maskKey)
	block := strings.Repeat("Aurora room has a projector [1]. ", 1000)
	in := block + maskKey + block + strings.ToUpper(maskKey[3:20]) + block
	want := block + redacted + block + redacted + block
	if got := m.mask(in); got != want {
		t.Errorf("large text masked wrongly (len %d, want %d)", len(got), len(want))
	}
}

func FuzzMask(f *testing.F) {
	f.Add(maskKey, "the key is "+maskKey)
	f.Add(maskKey, strings.ToUpper(maskKey[2:38]))
	f.Add(maskKey, base64.StdEncoding.EncodeToString([]byte("Bearer "+maskKey)))
	f.Add(maskKey, strings.Join(strings.Split(maskKey, ""), " \n"))
	f.Add("short", "a short secret, SHORT")
	f.Add("ünïcødé-Schlüssel-ſK", "ÜNÏCØDÉ-SCHLÜSSEL-SK")
	f.Add("sk-\xff\xfe-invalid-utf8", "x\xff\xfe-invalid-utf8y")
	f.Fuzz(func(t *testing.T, secret, text string) {
		m := newMasker(secret)
		got := m.mask(text)
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("valid input %q masked into invalid UTF-8 %q", text, got)
		}
		if !strings.Contains(text, redacted) && !strings.Contains(got, redacted) && got != text {
			t.Fatalf("text changed without a marker: %q -> %q", text, got)
		}
		if utf8.RuneCountInString(secret) < runLen || strings.Contains(secret, redacted) {
			return
		}
		// The marker itself may hold a run of the secret: the check runs
		// on what lies between markers, in the text as in the secret.
		if strings.Contains(text, redacted) {
			return
		}
		if l := leakedRuns(secret, got); len(l) > 0 {
			t.Fatalf("secret %q, text %q: masked %q still holds %q", secret, text, got, l)
		}
	})
}
