// Package catalogue is the host's registry of catalogue entity types: the
// kinds of record (e.g. "booking.resource") that plugins declare in their
// self-description and that search makes findable and readable.
//
// The registry is the one place that decides whether an entity type may be
// provided at all. Types that carry personal or financial data — "user" and
// "invoice", and any dotted name ending in them such as "crm.user" or
// "shop.invoice" — are refused always, as are the names the operator lists
// under search.blocked_entities. A refusal is a start-up error, so nothing of
// that kind is ever indexed or returned. Each entity type has exactly one
// provider.
package catalogue
