// Package auth turns an Authorization header into a principal.
//
// A Store holds only the SHA-256 hashes of the configured bearer tokens, in
// a map. Authenticate hashes the presented token once and looks the hash up,
// so a request costs the same with one token or ten thousand. The lookup's
// timing can reveal something about the presented token's hash at most,
// never a token (see Store). Malformed headers are refused before any
// hashing, which bounds the work an unauthenticated request can cause.
package auth
