//go:build !unix

package events

// lockDir guards nothing without flock: capgate ships for Unix only, and a
// build for another system must not run two hosts on one data_dir.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
