// Package e2e tests the capgate binary from the outside, the way its users
// meet it: the real host (host/cmd/capgate) and the real booking and search
// plugins are built, started as processes with a test configuration (packs
// booking and search), and driven over HTTP by the official MCP tools:
//
//   - the MCP conformance suite (@modelcontextprotocol/conformance, server
//     scenarios), with a list of expected failures that names a reason for
//     each one and fails when an expected failure starts to pass;
//   - the TypeScript SDK client (@modelcontextprotocol/sdk), through
//     js/client.mjs, and its OAuth sign-in (authorization code with PKCE
//     against a real authorization server the test runs, authtest) through
//     js/oauth.mjs;
//   - the Go SDK client (github.com/modelcontextprotocol/go-sdk/mcp), once
//     per supported protocol version;
//
// and a shutdown test sends SIGTERM while calls are in flight and checks
// that the host drains them, exits 0 and leaves no plugin process behind;
// another kills the host with SIGKILL and checks that no plugin process
// outlives it either.
//
// The JavaScript tools live in the npm project js/ and run on the Node 22
// binary that project installs (js/node_modules/node/bin/node). Without
// js/node_modules the tests that need it skip, unless CI=true, where they
// fail instead: `npm ci --prefix host/e2e/js` installs it.
//
// The package holds tests only; this file exists so that the directory is a
// package for go build and go vet.
package e2e
