// Package storetest is the behaviour every store.Store must show, written
// once and run against each engine: a new engine passes by calling
// RunContract from its own test with a constructor for an empty store.
package storetest
