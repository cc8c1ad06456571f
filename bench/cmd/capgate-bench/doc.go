// Command capgate-bench measures capgate's MCP endpoint against reference
// servers, one at a time, with the same load generator and the same trivial
// tool.
//
// The servers are:
//
//   - capgate: the real "capgate serve" binary started as a subprocess, with
//     hello.greet served by the hello SDK plugin through the whole path
//     (HTTP, MCP adapter, gate, gRPC plugin);
//   - echo: a bare echo handler returning a fixed JSON body, the floor;
//   - go-sdk: the official MCP Go SDK's stateless Streamable HTTP handler;
//   - mcp-go: mcp-go's Streamable HTTP server in stateless mode;
//   - booking: capgate again, calling booking.get (SQLite-backed) for a
//     seeded booking owned by the bench user;
//   - search: capgate with the synthetic plugin (a generated catalogue of
//     -search-documents items) and the search plugin, loaded with
//     platform.search over 50 one- and two-word queries in turn (limit
//     10), then, once capgate has stopped, the floor: BenchmarkFloor of the
//     search plugin's index package (capgate-search-floor.test, its test
//     binary) running the same queries on the very index the search plugin
//     built, in-process through index.Search, at the same concurrency. Both
//     run twice: at -connections (throughput) and at one connection / one
//     goroutine (p50 of a single search, no queueing). The report adds
//     the index's build time (capgate start → every document searchable)
//     and size on disk, and judges two targets: platform.search at least
//     0.8× the floor's throughput, and at most 0.3 ms added to the floor's
//     p50 at one connection;
//   - replicas (opt-in, only when named in -only; replicas.go):
//     booking.get and booking.create on SQLite with one capgate, and on
//     PostgreSQL (-pg-dsn) with one and two capgates sharing a fresh
//     database and a JetStream stream (-nats-url). Two replicas are loaded
//     by two simultaneous wrk processes with half the connections each;
//     their req/s add up and the worse p99 is shown.
//
// The in-process servers (echo, go-sdk, mcp-go) each listen on their own
// loopback port inside this process. Every server is first checked with one
// plain HTTP tools/call whose answer must be the right result, then loaded
// with wrk (keep-alive, -c connections, a warm-up run that is discarded, then
// the measured run). During the measured run a wrk Lua hook checks every
// response body, so a server answering errors quickly cannot win.
//
// Usage:
//
//	capgate-bench [-bin ../bin] [-duration 10s] [-warmup 2s] [-connections 64]
//	              [-threads 2] [-only capgate,echo,go-sdk,mcp-go,booking,search]
//	              [-rounds 1] [-settle 30s] [-start-timeout 30s]
//	              [-search-documents 100000] [-search-ready-timeout 15m]
//	              [-pg-dsn postgres://...] [-nats-url nats://...] [-pg-pool-max-conns 0]
//
// The bin directory must hold capgate and capgate-plugin-hello (built from
// host/internal/app/testdata/plugins/hello), capgate-plugin-booking when the
// booking row is selected, and capgate-plugin-synthetic (this module's
// plugins/synthetic), capgate-plugin-search and capgate-search-floor.test
// (go test -c ./plugins/search/internal/index) when the search rows are;
// make bench builds them all.
//
// The bench is a module of its own (bench/go.mod), built against the
// capgate checkout it sits in: the reference servers it loads, such as
// mcp-go's, are no dependency of capgate itself.
//
// The bench shares the machine with whatever else runs on it. Before each
// server it waits (up to -settle) for other processes to leave the CPU idle,
// and during each measured run it records how much CPU the server, wrk and
// everything else used; a run during which other processes used more than
// 0.2 cores is flagged. With -rounds N the whole sequence runs N times and
// the report shows, for each server, the median of its undisturbed runs (of
// all its runs when every one was disturbed) and how many were undisturbed.
//
// The report is a table of requests/s, p50, p99 and each server's throughput
// relative to capgate, followed by a PASS/FAIL line per target (capgate at
// least mcp-go's throughput; capgate at least three times go-sdk's). A missed
// target is reported, not turned into an exit status: the exit status is
// non-zero only when a server could not be set up or measured.
package main
