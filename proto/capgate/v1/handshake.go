package capgatev1

// The handshake both sides of the plugin contract agree on. go-plugin refuses
// to start a binary whose environment lacks the cookie (so a plugin run by
// hand explains itself instead of hanging) and negotiates the highest
// protocol version both sides list.
const (
	MagicCookieKey   = "CAPGATE_PLUGIN"
	MagicCookieValue = "8f1c7d4e-capgate-plugin-v1"

	// ProtocolVersion is the contract version this package describes. Bump
	// it when a change is not backwards compatible. Version 2 moved the
	// ownership step into the call (InvokeRequest.owner_check): a version 1
	// plugin would ignore the check, so the host must not start one.
	ProtocolVersion = 2

	// PluginName is the key of the plugin in go-plugin's plugin set.
	PluginName = "capgate"
)
