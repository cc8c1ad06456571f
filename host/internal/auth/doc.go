// Package auth turns an Authorization header into a principal.
//
// A Store holds only the SHA-256 hashes of the configured bearer tokens.
// Authenticate hashes the presented token once and compares it with every
// stored hash in constant time, without stopping at a match, so neither the
// time taken nor the work done tells an attacker which entry, if any, came
// close. Malformed headers are refused before any hashing, which bounds the
// work an unauthenticated request can cause.
package auth
