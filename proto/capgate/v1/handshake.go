package capgatev1

// The handshake both sides of the plugin contract agree on. go-plugin refuses
// to start a binary whose environment lacks the cookie (so a plugin run by
// hand explains itself instead of hanging) and negotiates the highest
// protocol version both sides list.
const (
	MagicCookieKey   = "CAPGATE_PLUGIN"
	MagicCookieValue = "8f1c7d4e-capgate-plugin-v1"

	// ProtocolVersion is the contract version this package describes. Bump
	// it, and serve both versions for a while, when a change is not
	// backwards compatible.
	ProtocolVersion = 1

	// PluginName is the key of the plugin in go-plugin's plugin set.
	PluginName = "capgate"
)
