// Package config loads and validates the capgate host configuration.
//
// A configuration is one YAML file. Load reads it, Parse does the same for
// bytes already in memory. Both check everything they can and report every
// problem at once: the returned *Error holds one Problem per mistake, each
// located by its key path (for example "tokens[2].scope") so an operator can
// fix a file in one pass.
//
// Values are layered, lowest first: built-in defaults, the file, then
// environment variables named CAPGATE_<KEY> (nested keys joined by "_", as in
// CAPGATE_HTTP_MAX_BODY_BYTES or CAPGATE_PACKS_BOOKING). The scalar settings
// go through viper for that layering. Lists and maps (tokens, roles,
// plugins) are decoded from the YAML node tree directly: viper lower-cases
// and merges keys, which would rewrite a plugin's free-form config block and
// lose the positions needed to name a bad list item.
//
// Inside string values, ${VAR} and ${VAR:-default} are replaced from the
// environment after the YAML is parsed, so a secret holding YAML-special
// characters cannot change the document's structure; "$$" stands for a
// literal "$". Values from CAPGATE_* variables are taken literally.
//
// Plain tokens are hashed with SHA-256 while loading and only the hash is
// kept; no error message ever repeats a token.
package config
