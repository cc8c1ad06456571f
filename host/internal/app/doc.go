// Package app assembles a capgate host from its configuration.
//
// New provisions (start the plugins, register their capabilities, build the
// gate and the HTTP server) and validates as it goes, so a host that returns
// from New is complete; Run serves until its context ends, then drains
// in-flight calls and stops every plugin. Nothing is left running when New
// fails or Run returns.
package app
