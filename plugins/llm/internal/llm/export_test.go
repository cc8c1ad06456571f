package llm

// SearchQuery is searchQuery, for the tests of package llm_test.
var SearchQuery = searchQuery
