package llm

// SearchQuery is searchQuery, for the tests of package llm_test.
var SearchQuery = searchQuery

// CheckAsk is llm.ask's own check of its input, which the host's schema
// validation otherwise runs before.
func CheckAsk(in AskIn) error {
	_, _, err := checkAsk(in)
	return err
}
