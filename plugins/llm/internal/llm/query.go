package llm

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/capgate/capgate/sdk/platform"
)

// platform.search's limits on one query, as its contract states them: a
// longer query is refused, not shortened, so llm.ask shortens its own.
const (
	// searchMaxQueryLen is the longest query, in characters.
	searchMaxQueryLen = platform.MaxQueryLen
	// searchMaxTerms is the most terms a query may have after analysis
	// (stop words not counted).
	searchMaxTerms = platform.MaxQueryTerms
)

// searchQuery derives platform.search's query from a question so that it
// always fits the search's limits: the question's words, in order, without
// punctuation, very common words and repeats, as many as fit in
// searchMaxTerms words and searchMaxQueryLen characters; left is how many
// more there were. A question of common words only is searched with those
// (and finds nothing); one without any word gives "".
//
// The words are split finer than the search's analyzer splits them (every
// letter or digit run is a word, a Han or Hiragana character is one on its
// own, as there), and they are joined by spaces, so the search counts at
// most one term per word kept however it analyzes them.
func searchQuery(question string) (query string, left int) {
	words := splitWords(question)
	content := make([]string, 0, len(words))
	for _, w := range words {
		if !stopWords[strings.ToLower(w)] {
			content = append(content, w)
		}
	}
	if len(content) == 0 {
		content = words
	}
	var b strings.Builder
	seen := map[string]bool{}
	n, chars := 0, 0
	for _, w := range content {
		key := strings.ToLower(w)
		if seen[key] {
			continue
		}
		l := utf8.RuneCountInString(w)
		if chars > 0 {
			l++ // the space before it
		}
		seen[key] = true
		if n == searchMaxTerms || chars+l > searchMaxQueryLen {
			left++ // a shorter word further on may still fit
			continue
		}
		if chars > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		chars += l
		n++
	}
	return b.String(), left
}

// Rune classes for splitting words.
const (
	sepClass  = iota // ends a word: space, punctuation, symbols
	wordClass        // letters (other than the kinds below), decimal digits, connectors like _
	kanaClass        // Katakana: a run is one word
	ideoClass        // Han and Hiragana: each character is a word
	markClass        // combining marks and format characters: part of the word before
)

func classOf(r rune) int {
	switch {
	case unicode.In(r, unicode.Han, unicode.Hiragana):
		return ideoClass
	case unicode.Is(unicode.Katakana, r) || r == 'ー' || r == 'ｰ':
		return kanaClass
	case unicode.In(r, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar, unicode.Tai_Le,
		unicode.New_Tai_Lue, unicode.Tai_Tham, unicode.Tai_Viet, unicode.Ahom):
		// Written without spaces between words, which the search's
		// word splitting does not find: it indexes no word of them.
		return sepClass
	case unicode.IsLetter(r), unicode.IsDigit(r), unicode.Is(unicode.Pc, r):
		return wordClass
	case unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me, unicode.Cf):
		return markClass
	}
	return sepClass
}

// splitWords returns the words of s: runs of letters and digits, split
// where their kind changes and after every Han or Hiragana character. A
// run with neither a letter nor a digit (only connectors) is no word.
func splitWords(s string) []string {
	var words []string
	start, cur := -1, sepClass
	end := func(i int) {
		if start >= 0 {
			if w := s[start:i]; strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
				words = append(words, w)
			}
		}
		start, cur = -1, sepClass
	}
	for i, r := range s {
		c := classOf(r)
		switch {
		case c == markClass && start >= 0:
			continue
		case c == markClass, c == sepClass:
			end(i)
			continue
		case start >= 0 && (c != cur || c == ideoClass):
			end(i)
		}
		if start < 0 {
			start, cur = i, c
		}
	}
	end(len(s))
	return words
}

// stopWords are the words too common to find anything by: the search's
// own English stop words (which it does not count), the pieces its
// contractions split into here (don't → don, t), and a few more of the
// words questions are asked with.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
		she her hers herself it its itself they them their theirs themselves what which who whom
		this that these those am is are was were be been being have has had having do does did
		doing would should could ought cannot a an the and but if or because as until while of at
		by for with about against between into through during before after above below to from up
		down in out on off over under again further then once here there when where why how all
		any both each few more most other some such no nor not only own same so than too very
		s t d ll m re ve don doesn didn isn aren wasn weren hasn haven hadn won wouldn shan
		shouldn couldn mustn let
		can will may might must shall us also just please tell know`) {
		m[w] = true
	}
	return m
}()
