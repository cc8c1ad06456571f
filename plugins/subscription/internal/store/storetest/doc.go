// Package storetest is the behaviour every store.Store must show, written
// once and run against each engine: a new engine (PostgreSQL next) passes by
// calling RunContract from its own test with a constructor for an empty
// store.
package storetest
