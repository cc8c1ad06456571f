// Package ratelimit holds the gate's rate-limit counters, the
// implementations of dispatch.Limiter: Memory for one host, kept in its
// process, and Redis for replicas that must hold one limit between them.
//
// # Memory
//
// A token bucket per key (golang.org/x/time/rate) in this process. Each
// replica counts its own, so N replicas admit up to N times the limit.
//
// # Redis
//
// One count per key in a Redis shared by all replicas, kept by the GCRA
// script of github.com/go-redis/redis_rate: one EVALSHA per call, atomic in
// Redis, timed by Redis's own clock, so replicas with skewed clocks still
// agree. A Rate of Count per Per with burst B is the GCRA limit of Count
// per Per with burst B (B = Rate.BurstOrCount()). A refused call takes
// nothing from the count and is told how long until one would be admitted.
//
// Keys. The gate's keys hold any bytes ("\x00" separators, token labels,
// capability names), so they are never written to Redis as they are. The
// Redis key is
//
//	rate:<prefix><count>/<per>/<burst>:k:<base64url of the key>   keys up to 96 bytes
//	rate:<prefix><count>/<per>/<burst>:h:<base64url of SHA-256>  longer keys
//
// "rate:" is added by redis_rate; the prefix (RedisOptions.Prefix, by
// default "capgate:") lets several deployments share one Redis. The key is
// at most a few hundred bytes whatever the caller passes, and distinct keys
// stay distinct: the short form is reversible and the two forms are tagged
// apart. The effective rate is part of the key, so a reloaded configuration
// with a new rate starts a fresh count, as Memory does, while writing the
// same rate another way (burst 0 or burst = count) keeps it. Every key
// carries a Redis expiry of the time its count takes to refill, so idle
// keys and the keys of old rates go away by themselves.
//
// Failure. Each Allow is bounded by RedisOptions.Timeout (default 200 ms)
// as a whole — dial, write, read and the one retry on a broken
// connection — so a slow or absent Redis costs a call at most that. When
// Redis cannot be reached or answers with an error, Allow either returns
// the error, and the gate refuses the call (the default: a limit that
// cannot be counted is not held), or, with RedisOptions.FailOpen, admits the
// call as if no limit applied. Either way it logs a warning, at most one
// per half minute with the number of failures since the last one, naming
// Redis by host and port only: never the URL's password, never the key.
// go-redis's own log lines, which repeat every failed dial, go to slog at
// debug level once a Redis counter exists (the library's logger is one
// for the process). A call whose own context ends gets the context's error in both modes and
// logs nothing: that is the caller leaving, not Redis failing.
//
// NewRedis does not connect, so a host can start while Redis is down; use
// Ping at start-up to check it answers.
package ratelimit
