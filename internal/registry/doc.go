// Package registry holds the capabilities the host can dispatch.
//
// A Capability is a plain, protocol-neutral record: nothing in it belongs to
// MCP or any other wire format, so a second protocol adapter projects the
// same registry without a change here. The registry is filled once at start-up
// (from the plugins' self-descriptions) and is read-only afterwards, so it
// needs no locking on the request path.
package registry
