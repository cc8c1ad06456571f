// Package capgatev1 is the gRPC contract between the capgate host and its
// plugins (generated from plugin.proto), plus the handshake constants both
// sides use. Plugin authors normally use package sdk, which hides it.
package capgatev1
