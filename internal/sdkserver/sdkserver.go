// Package sdkserver hands package sdktest, and the host's own tests, the
// SDK's plugin server without exporting it from package sdk: a test serves
// a plugin with exactly the code sdk.Serve runs in production.
package sdkserver

import "github.com/capgate/capgate/internal/pluginwire"

// Server is the SDK's PluginService for one plugin.
type Server interface {
	pluginwire.Server
	// Close runs the plugin's OnClose functions once, as sdk.Serve does
	// when the host stops the plugin.
	Close() error
}

// NewServer is set by package sdk: it returns the server of an
// *sdk.Plugin.
var NewServer func(plugin any) Server
