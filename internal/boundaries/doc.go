// Package boundaries holds no code: its test checks that the layout's
// boundaries hold, because the compiler alone does not stop a plugin in
// this module from importing the host's internals.
package boundaries
