package mcp

// Protocol versions the adapter speaks, newest first.
const (
	// Version20260728 is the stateless revision: no initialize handshake,
	// version and client capabilities in every request's _meta,
	// server/discover, Mcp-Method/Mcp-Name headers.
	Version20260728 = "2026-07-28"
	// Version20251125 is the newest revision with the initialize handshake.
	Version20251125 = "2025-11-25"
	// Version20250618 added structured tool output and removed batching.
	Version20250618 = "2025-06-18"
	// Version20250326 introduced Streamable HTTP; it is also what a request
	// without an MCP-Protocol-Version header is taken to speak.
	Version20250326 = "2025-03-26"
)

// version is a supported protocol revision; the zero value is none.
type version uint8

const (
	v20250326 version = iota + 1
	v20250618
	v20251125
	v20260728
)

// latestLegacy is what initialize negotiates when the client asks for a
// revision it cannot have over initialize (2026-07-28 has no handshake).
const latestLegacy = v20251125

var versionNames = [...]string{
	v20250326: Version20250326,
	v20250618: Version20250618,
	v20251125: Version20251125,
	v20260728: Version20260728,
}

// SupportedVersions returns the protocol versions served, newest first.
func SupportedVersions() []string {
	return []string{Version20260728, Version20251125, Version20250618, Version20250326}
}

func parseVersion(s string) version {
	switch s {
	case Version20260728:
		return v20260728
	case Version20251125:
		return v20251125
	case Version20250618:
		return v20250618
	case Version20250326:
		return v20250326
	}
	return 0
}

func (v version) String() string {
	if int(v) < len(versionNames) && v != 0 {
		return versionNames[v]
	}
	return "unknown"
}

// modern reports a stateless revision: per-request _meta, no handshake.
func (v version) modern() bool { return v >= v20260728 }

// structured reports whether tools carry outputSchema and results
// structuredContent (added in 2025-06-18).
func (v version) structured() bool { return v >= v20250618 }

// batches reports whether a POST body may be a JSON-RPC batch (only
// 2025-03-26; 2025-06-18 removed batching).
func (v version) batches() bool { return v == v20250326 }
