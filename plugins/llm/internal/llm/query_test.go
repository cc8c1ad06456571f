package llm_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capgate/capgate/plugins/llm/internal/llm"
)

// fits fails t unless platform.search accepts q: within its length, and
// within its term count as its analyzer counts them.
func fits(t *testing.T, q string) {
	t.Helper()
	if strings.TrimSpace(q) == "" {
		t.Errorf("search query %q is empty", q)
	}
	if n := utf8.RuneCountInString(q); n > 500 {
		t.Errorf("search query has %d characters, over 500: %q", n, q)
	}
	if n := len(searchTerms(q)); n > 32 {
		t.Errorf("search query has %d terms, over 32: %q", n, q)
	}
}

// Questions far over the search's limits are answered, grounded in a
// search for their first words, which platform.search accepts.
func TestAskLongQuestionsSearchWithinTheLimits(t *testing.T) {
	var words60 []string
	for i := range 60 {
		words60 = append(words60, fmt.Sprintf("word%02d", i))
	}
	// 4000 bytes: the question's words first, then distinct filler words,
	// so both the term and the length limit are exceeded many times over.
	var b strings.Builder
	b.WriteString("Which room has a projector? ")
	for i := 0; b.Len() < 4000; i++ {
		fmt.Fprintf(&b, "and the filler%03d, ", i)
	}
	q4000 := strings.TrimSpace(b.String()[:3999]) + "?"
	for len(q4000) < 4000 {
		q4000 = " " + q4000
	}
	long := strings.Repeat("supercalifragilisticexpialidocious ", 3) // each word is 34 characters
	for i := range 40 {
		long += fmt.Sprintf("projector%026d ", i)
	}

	for _, tc := range []struct {
		name, question string
		grounded       bool   // a hit is expected
		wantQuery      string // "" : only that it fits
	}{
		{name: "4000 bytes", question: q4000, grounded: true},
		{name: "60 words", question: strings.Join(words60, " "), wantQuery: strings.Join(words60[:32], " ")},
		{name: "long words, cut by length", question: long},
		{name: "only stop words", question: "What is it that they would have been doing there, and why?", wantQuery: "What is it that they would have been doing there and why"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			out, te, err := r.ask(t, context.Background(), map[string]any{"question": tc.question})
			if err != nil || te != nil {
				t.Fatalf("llm.ask: %v %v", err, te)
			}
			if out.Answer == "" {
				t.Error("no answer")
			}
			q := r.cat.lastQuery(t)
			fits(t, q)
			if tc.wantQuery != "" && q != tc.wantQuery {
				t.Errorf("searched for %q, want %q", q, tc.wantQuery)
			}
			if tc.grounded && !slices.Contains(sourceIDs(out.Sources), "room-aurora") {
				t.Errorf("sources = %v: the question's first words were not searched for", sourceIDs(out.Sources))
			}
			// The model still reads the whole question.
			if !strings.Contains(r.fake.last(t).prompt(), "Question: "+strings.TrimSpace(tc.question)) {
				t.Error("the prompt lacks the whole question")
			}
		})
	}
}

// A question with no word at all is not searched for: the answer is
// ungrounded, as when the caller may not search.
func TestAskWithoutWordsAnswersUngrounded(t *testing.T) {
	r := newRig(t, rigOpts{})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "?!… ¿¿ 🤔 —"})
	if err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	if len(out.Sources) != 0 || out.Answer == "" || len(r.cat.searches) != 0 {
		t.Errorf("result %+v after searches %v; want an ungrounded answer and no search", out, r.cat.searches)
	}
	if !strings.Contains(r.fake.last(t).Body.Messages[0].Content, "No platform data is available") {
		t.Error("the model was not told it has no platform data")
	}
	if !strings.Contains(r.logs.String(), "no words to search for") {
		t.Errorf("no debug line says why:\n%s", r.logs)
	}
}

func TestSearchQuery(t *testing.T) {
	han := []rune{}
	for r := rune(0x4e00); len(han) < 40; r++ {
		han = append(han, r)
	}
	hanWords := make([]string, 32)
	for i := range hanWords {
		hanWords[i] = string(han[i])
	}
	for _, tc := range []struct{ question, want string }{
		{"Which room has a projector?", "room projector"},
		{"Room, ROOM; room… and a projector!", "Room projector"},
		{"Alice's room, isn't it?", "Alice room"},
		{"what is it?", "what is it"},
		{"foo_bar e-mail at 12pm, 3.5 m²", "foo_bar e mail 12pm 3 5"},
		{"Quiet \"standing desk\" near café", "Quiet standing desk near café"},
		{"東京タワーの会議室", "東 京 タワー の 会 議 室"},
		{"ห้องประชุม room", "room"},
		{string(han), strings.Join(hanWords, " ")},
		{"?!… 🤔", ""},
		{"", ""},
	} {
		if got, _ := llm.SearchQuery(tc.question); got != tc.want {
			t.Errorf("SearchQuery(%q) = %q, want %q", tc.question, got, tc.want)
		}
	}
	if _, left := llm.SearchQuery(string(han)); left != 8 {
		t.Errorf("40 Han characters: %d left out, want 8", left)
	}
}

// Whatever the question, platform.search accepts the query derived from
// it, counted by the search's own analyzer: questions drawn from letters of
// many scripts, digits, marks, connectors, apostrophes, quotes and symbols.
func TestSearchQueryAlwaysFits(t *testing.T) {
	alphabet := []rune("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 __--''\"\".,;:!?/()[]{}+*&%$#@~`^|\\<>=" +
		"éüßøçñ\u0301\u0308\u200d\u00ad" + // Latin with combining marks, a joiner, a soft hyphen
		"абвгдежзαβγδεζ" + // Cyrillic, Greek
		"שלוםעולם״׳" + // Hebrew with its quote marks
		"مرحبابالعالم١٢٣" + // Arabic and its digits
		"한국어회의실" + // Hangul
		"東京会議室日本語" + // Han
		"ひらがなカタカナーｱｲｳﾞ" + // Hiragana, Katakana, half-width
		"ห้องประชุมລາວ" + // Thai, Lao
		"🤔👍🏽🇩🇪①²½Ⅻ", // emoji, modifiers, flags, other numbers
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		n := 1 + rng.IntN(1200)
		q := make([]rune, n)
		for i := range q {
			q[i] = alphabet[rng.IntN(len(alphabet))]
		}
		query, _ := llm.SearchQuery(string(q))
		if n := utf8.RuneCountInString(query); n > 500 {
			t.Fatalf("SearchQuery(%q) has %d characters", string(q), n)
		}
		if terms := searchTerms(query); len(terms) > 32 {
			t.Fatalf("SearchQuery(%q) = %q has %d terms: %q", string(q), query, len(terms), terms)
		}
	}
}
