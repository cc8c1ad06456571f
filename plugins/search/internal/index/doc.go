// Package index is the full-text catalogue index behind capgate's search
// plugin: a persistent bleve v2 index kept in one directory.
//
// Providers' catalogue records arrive as [Document] values (an entity type such
// as "booking.resource", an id, a title, a description and optional extra
// text fields). [Index.Upsert] adds or replaces them in batches,
// [Index.Delete] and [Index.DeleteEntity] remove them, and
// [Index.SetVersion]/[Index.Version] remember each provider's catalogue
// version so that a full resync runs only when that version changed.
//
// [Index.Search] turns a user's words into one bleve query:
//
//   - every word is matched exactly against title (boosted), extra fields and
//     body;
//   - every word of at least [MinFuzzyLen] letters also matches with an edit
//     distance of one (a one-letter typo, a missing or extra letter, or two
//     swapped neighbours), scored below an exact match;
//   - the last word also matches as a prefix ("conf" finds "conference"), so
//     a query typed incrementally finds something at every keystroke;
//   - typo and prefix words are expanded against the term dictionary (at most
//     32 terms per word and field, the most frequent kept, fewer when many
//     words share the query's budget), and the exact word is not repeated
//     among them, so a common word's postings are read once;
//   - text in double quotes is a phrase that must occur in that order;
//   - an optional entity filter restricts hits to one entity type.
//
// Text is analyzed with bleve's "standard" analyzer (Unicode word
// boundaries, lower case, English stop words removed) and deliberately not
// stemmed: prefix and fuzzy matching work on the indexed terms, and stemmed
// terms ("confer" for "conference") would break prefix queries typed past the
// stem. Plurals and similar one-letter inflections are still caught by the
// fuzzy match.
//
// Hits come back ranked by score (ties by document id) with a plain-text
// snippet: the best highlighted fragment of the body or extra fields, or the
// start of the body when nothing there matched. The snippet never contains
// markup.
//
// # Limits
//
// Every word costs dictionary scans and term queries, which typo and
// prefix matching multiply, so a query's cost is bounded before any index
// work, whoever calls: at most [MaxQueryLen] characters and [MaxTerms]
// terms after analysis (a [LimitError] otherwise); typo and prefix
// expansions share one budget per query ([MaxExpandedTerms] terms found in
// at most [MaxScannedEntries] dictionary entries), split evenly among the
// dictionaries read, so one- to three-word queries expand as before and a
// 32-word one no further in total; so at most [MaxTermQueries] term
// queries run, which bleve is also told to enforce. Words longer than 32
// characters are not matched with a typo. Search stops when its context is
// done (the search plugin gives each search a deadline): between
// dictionary scans, before bleve collects, every 1024 matches while it
// does, and before highlighting. Errors quote at most the first 64
// characters of the query.
//
// A [Query.Limit] of zero or less means [DefaultLimit]. The index applies no
// upper bound of its own: capping a limit (the plugin's max_results) is the
// caller's job, done before calling Search.
//
// [Index.List] pages through every document in (entity, id) order with
// bleve's sort and search-after, so a listing visits each document once.
// [Index.Apply] writes document changes together with metadata values
// ([Index.Meta]) in one batch: a subscriber keeps its cursor there, so a
// document change and the cursor of the event that caused it commit
// atomically. [Open] fails after [LockTimeout] with [ErrInUse] when another
// process holds the index, instead of waiting for it.
//
// An Index is safe for concurrent use; searches run while upserts are in
// flight and see each batch either entirely or not at all.
package index
