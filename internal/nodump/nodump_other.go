//go:build !linux

package nodump

// Set does nothing outside Linux: capgate uses no other system's
// equivalent, so there a plugin can read what its user may read.
func Set() error { return nil }
