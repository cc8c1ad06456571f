package pluginhost

import (
	"errors"
	"strings"

	"github.com/hashicorp/go-plugin"
)

// explainStart adds the likely cause to go-plugin's start errors.
func explainStart(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return errors.New("its SHA-256 does not match the configured sha256 (the binary changed; verify it and update the digest)")
	case strings.Contains(msg, "Incompatible API version"):
		return errors.New("it speaks an incompatible plugin protocol version (rebuild it against this capgate's sdk)")
	case strings.Contains(msg, "exited before we could connect") || strings.Contains(msg, "plugin exited") ||
		strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
		return errors.New("it exited before the handshake (is it a capgate plugin built with sdk.Serve? see its log lines above)")
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return errors.New("it wrote something other than the go-plugin handshake to stdout (is it a capgate plugin built with sdk.Serve?)")
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return errors.New("it did not complete the handshake in time")
	}
	return err
}
