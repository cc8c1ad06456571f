// Package pluginhost starts, describes and stops capgate's plugins.
//
// Each plugin is a separate process launched through hashicorp/go-plugin
// with capgate's handshake. Its lifecycle is: start (the binary is found,
// its optional SHA-256 verified, the handshake negotiated) → configure (its
// config block and data directory) → describe (its capabilities, validated
// into the registry by the caller) → serve → stop. Any failure before serve
// stops every plugin already started, so the host either starts whole or
// not at all, and leaves no process behind.
package pluginhost
