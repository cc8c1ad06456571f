package config

import (
	"fmt"
	"strings"
)

// expand replaces ${VAR} and ${VAR:-default} in s with values from lookup
// and turns "$$" into "$". A "$" followed by anything else is kept, so a
// password such as "pa$word" needs no escaping. ${VAR} with VAR set but
// empty is empty; ":-" falls back to the default when VAR is unset or empty,
// as in the shell.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated %q: a reference is written ${NAME} or ${NAME:-default}", s[i:])
			}
			ref := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !validEnvName(name) {
				return "", fmt.Errorf("invalid reference ${%s}: a variable name is letters, digits and _, not starting with a digit", ref)
			}
			val, ok := lookup(name)
			switch {
			case hasDef && val == "":
				val = def
			case !ok:
				return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)
			}
			b.WriteString(val)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
