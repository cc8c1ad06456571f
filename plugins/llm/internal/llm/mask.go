package llm

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// runLen is the shortest run of a secret that is masked: a provider
// quoting most of a wrong key ("sk-abc…xyz" minus a few characters), or a
// model asked to spell it out, must not hand the agent enough to rebuild
// it, while runs this long almost never occur in ordinary text by chance.
const runLen = 8

// redacted replaces every masked run.
const redacted = "[redacted]"

// masker hides the configured secrets in text that came from the provider.
// It masks every run of runLen or more characters that also occurs in one
// of a secret's forms:
//
//   - the secret itself, compared case-insensitively (simple Unicode case
//     folding, so upper-cased and mixed-case copies match);
//   - its base64 encodings, standard and URL alphabet, padded or not, at
//     each of the three byte alignments, so the secret inside a longer
//     encoded text ("Bearer <key>", "user:<key>") is found too;
//   - any of these with separators inserted between its characters: a
//     separator is anything but a letter or digit (spaces, line breaks,
//     punctuation, symbols, zero-width and combining characters), and a
//     copy is found when runLen of its letters and digits in a row belong
//     to a form; the separators inside it are masked with it.
//
// A secret shorter than runLen is masked only where it appears whole (in
// any case). Other disguises (hex, reversed, homoglyphs, a model's
// paraphrase) are not recognised. The work is linear in the text's length:
// every runLen-gram of every form is indexed once, and the text is scanned
// once per pass with one map lookup per character.
type masker struct {
	raw   map[gram]struct{} // runLen-grams of every form, case-folded
	split map[gram]struct{} // the same with separators removed
	whole [][]rune          // secrets shorter than runLen, case-folded
}

type gram [runLen]rune

// newMasker indexes the non-empty secrets. A nil or empty masker masks
// nothing.
func newMasker(secrets ...string) *masker {
	m := &masker{raw: map[gram]struct{}{}, split: map[gram]struct{}{}}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		folded := foldString(s)
		if len(folded) < runLen {
			if !slices.ContainsFunc(m.whole, func(w []rune) bool { return slices.Equal(w, folded) }) {
				m.whole = append(m.whole, folded)
			}
			continue
		}
		for _, f := range forms(s) {
			f := foldString(f)
			addGrams(m.raw, f)
			addGrams(m.split, slices.DeleteFunc(f, isSeparator))
		}
	}
	return m
}

// connectionSecrets are what the configuration holds that must not leave
// the plugin: every connection's api_key and the credentials in its
// base_url (a user name only when it is long enough to be a token rather
// than a word such as "admin").
func connectionSecrets(conns []Connection) []string {
	var out []string
	for _, c := range conns {
		out = append(out, c.APIKey)
		if u, err := url.Parse(c.BaseURL); err == nil && u.User != nil {
			if name := u.User.Username(); utf8.RuneCountInString(name) >= runLen {
				out = append(out, name)
			}
			if pw, ok := u.User.Password(); ok {
				out = append(out, pw)
			}
		}
	}
	return out
}

// forms is the secret and its base64 encodings. An encoding at alignment
// a is that of the secret after a bytes of something else, without the
// characters those bytes share. Each ends in its padding, so a padded copy
// is masked to its end; an unpadded one is a prefix of it.
func forms(s string) []string {
	out := []string{s}
	for a, drop := range []int{0, 2, 3} {
		b := append(make([]byte, a, a+len(s)), s...)
		out = append(out, base64.StdEncoding.EncodeToString(b)[drop:], base64.URLEncoding.EncodeToString(b)[drop:])
	}
	return out
}

func addGrams(set map[gram]struct{}, f []rune) {
	for i := 0; i+runLen <= len(f); i++ {
		set[gram(f[i:i+runLen])] = struct{}{}
	}
}

// fold maps r to one case: upper then lower, so letters whose cases do not
// round-trip (ſ, the Kelvin sign) land with their ASCII look-alikes.
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

func foldString(s string) []rune {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		out = append(out, fold(r))
	}
	return out
}

func isSeparator(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }

// span is a byte range [start, end) of the text to mask.
type span struct{ start, end int }

// window is the last runLen characters of a pass, with where each starts.
type window struct {
	runes  gram
	starts [runLen]int
	n      int
}

func (w *window) push(r rune, start int) {
	copy(w.runes[:], w.runes[1:])
	copy(w.starts[:], w.starts[1:])
	w.runes[runLen-1], w.starts[runLen-1] = r, start
	w.n = min(w.n+1, runLen)
}

// mask returns s with every run of a secret replaced by redacted; the rest
// of s, line breaks and invalid UTF-8 included, is unchanged.
func (m *masker) mask(s string) string {
	if m == nil || (len(m.raw) == 0 && len(m.whole) == 0) || s == "" {
		return s
	}
	spans := m.find(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	prev := 0
	for _, sp := range spans {
		b.WriteString(s[prev:sp.start])
		b.WriteString(redacted)
		prev = sp.end
	}
	b.WriteString(s[prev:])
	return b.String()
}

// find returns the spans to mask, sorted and merged.
func (m *masker) find(s string) []span {
	var all []span
	add := func(start, end int) {
		// Hits come mostly in overlapping runs: merging with the last one
		// keeps the list as short as the runs.
		if n := len(all); n > 0 && start <= all[n-1].end && start >= all[n-1].start {
			all[n-1].end = max(all[n-1].end, end)
			return
		}
		all = append(all, span{start, end})
	}
	var raw, split window
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		end := i + size
		f := fold(r)
		raw.push(f, i)
		if raw.n == runLen {
			if _, ok := m.raw[raw.runes]; ok {
				add(raw.starts[0], end)
			}
		}
		for _, w := range m.whole {
			if k := runLen - len(w); raw.n >= len(w) && slices.Equal(raw.runes[k:], w) {
				add(raw.starts[k], end)
			}
		}
		if !isSeparator(r) && len(m.split) > 0 {
			split.push(f, i)
			if split.n == runLen {
				if _, ok := m.split[split.runes]; ok {
					add(split.starts[0], end)
				}
			}
		}
		i = end
	}
	if len(all) < 2 {
		return all
	}
	slices.SortFunc(all, func(a, b span) int { return a.start - b.start })
	out := all[:1]
	for _, sp := range all[1:] {
		if last := &out[len(out)-1]; sp.start <= last.end {
			last.end = max(last.end, sp.end)
		} else {
			out = append(out, sp)
		}
	}
	return out
}
