// Package auth turns an Authorization header into a principal.
//
// A Store holds only the SHA-256 hashes of the configured bearer tokens, in
// a map. Authenticate hashes the presented token once and looks the hash up,
// so a request costs the same with one token or ten thousand. The lookup's
// timing can reveal something about the presented token's hash at most,
// never a token (see Store). Malformed headers are refused before any
// hashing, which bounds the work an unauthenticated request can cause.
//
// OAuth makes the host an OAuth 2.1 resource server beside the tokens
// (auth.oauth): it accepts JWT access tokens that the configured issuer
// signed for this resource, and publishes the protected resource metadata
// (RFC 9728) that tells clients where to get one. A token is checked in a
// fixed order, each failure a *TokenError that says what RFC 6750 answer
// it is: its shape (a compact JWS of at most MaxJWTLength bytes), its
// algorithm (one of the configured asymmetric ones: never "none", never
// HMAC), its type (an access token, not an ID or logout token), the key
// its kid names among the issuer's published keys, its signature, then
// iss, aud (RFC 8707: a token for another resource is refused, never used
// or passed on), exp, nbf and iat within the clock skew, sub, and no
// sender constraint (cnf) that capgate could not check. Its claims then
// make the principal: the highest capgate scope its scope (or scp) claim
// grants, the user id from the configured claim, the role from the role
// claim when it is one defined under roles. The label naming the
// principal in audit records and rate limits is "oauth:" and its sub, or a
// digest of a long or odd sub: stable, distinct per user, never the token.
//
// The issuer's keys are fetched when OAuth starts (found through the
// issuer's metadata unless jwks_url says where), again every
// jwks_refresh_interval, and at once when a token names a key not yet
// known, at most once every jwks_min_refresh_interval. Keys held stay in
// use while the issuer cannot be reached; a token that cannot be checked
// for want of keys is capgate's failure (503), not the token's.
//
// authtest runs a real authorization server for tests.
package auth
