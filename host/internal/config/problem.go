package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path is the key path of the bad value, e.g. "tokens[2].scope".
	Path string
	// Message says what is wrong and what would be accepted.
	Message string
	// Line is the file line holding the value; 0 when it did not come from
	// the file.
	Line int
	// Env is the environment variable that supplied the value, if one did.
	Env string
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Path)
	b.WriteString(": ")
	b.WriteString(p.Message)
	switch {
	case p.Env != "":
		fmt.Fprintf(&b, " (from %s)", p.Env)
	case p.Line > 0:
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	return b.String()
}

// Error is every problem found in one configuration. Its text has one line
// per problem, each starting with the key path, so a command can print it
// as is.
type Error struct {
	// File is the configuration file, empty when parsed from memory.
	File     string
	Problems []*Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each Problem to errors.As.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}
