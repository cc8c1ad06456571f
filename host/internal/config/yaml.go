package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxDepth bounds recursion through nested blocks and aliases, so an alias
// that refers to its own ancestor ends in a problem, not a stack overflow.
const maxDepth = 64

// maxFreeformNodes bounds the values all plugin config blocks together may
// hold once aliases are expanded.
const maxFreeformNodes = 1_000_000

// decodeYAML parses data into a node tree. An empty file yields nil.
func decodeYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return &doc, nil
	case err != nil:
		return nil, err
	default:
		return nil, fmt.Errorf("line %d: a config file holds one YAML document, found a second", extra.Line)
	}
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe renders a node for "got ..." in a message.
func describe(n *yaml.Node) string {
	n = resolve(n)
	switch {
	case isNull(n):
		return "null"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.ShortTag() == "!!str":
		return strconv.Quote(n.Value)
	default:
		return n.Value
	}
}

// describeValue renders a decoded value for "got ..." in a message.
func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// child is the key path of key under path. Keys that would read ambiguously
// in a dotted path are quoted.
func child(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

type pair struct {
	key     string
	path    string
	keyNode *yaml.Node
	val     *yaml.Node
}

// pairs returns a mapping's entries with YAML merge keys ("<<: *anchor")
// applied: explicit keys win over merged ones, earlier merges over later.
// Duplicate and non-scalar keys are reported and skipped.
func (l *loader) pairs(path string, n *yaml.Node, depth int) []pair {
	if depth > maxDepth {
		l.addf(path, n.Line, "nested too deeply")
		return nil
	}
	var out, merged []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, l.mergeSources(path, v, depth+1)...)
			continue
		}
		if k.Kind != yaml.ScalarNode || isNull(k) {
			l.addf(path, k.Line, "keys must be plain strings, got %s", describe(k))
			continue
		}
		p := child(path, k.Value)
		if seen[k.Value] {
			l.addf(p, k.Line, "duplicate key")
			continue
		}
		seen[k.Value] = true
		out = append(out, pair{key: k.Value, path: p, keyNode: k, val: v})
	}
	for _, m := range merged {
		if !seen[m.key] {
			seen[m.key] = true
			out = append(out, m)
		}
	}
	return out
}

func (l *loader) mergeSources(path string, v *yaml.Node, depth int) []pair {
	v = resolve(v)
	switch v.Kind {
	case yaml.MappingNode:
		return l.pairs(path, v, depth)
	case yaml.SequenceNode:
		var out []pair
		for _, item := range v.Content {
			if item = resolve(item); item.Kind != yaml.MappingNode {
				l.addf(child(path, "<<"), item.Line, "must be a mapping or a list of mappings, got %s", describe(item))
				continue
			}
			out = append(out, l.pairs(path, item, depth)...)
		}
		return out
	}
	l.addf(child(path, "<<"), v.Line, "must be a mapping or a list of mappings, got %s", describe(v))
	return nil
}

// mapping returns the entries of n, which must be a mapping or null.
func (l *loader) mapping(path string, n *yaml.Node) ([]pair, bool) {
	n = resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		l.addf(path, n.Line, "must be a mapping, got %s", describe(n))
		return nil, false
	}
	return l.pairs(path, n, 0), true
}

// sequence returns the items of n, which must be a list or null.
func (l *loader) sequence(path string, n *yaml.Node) ([]*yaml.Node, bool) {
	n = resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		l.addf(path, n.Line, "must be a list, got %s", describe(n))
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out, true
}

// unknown reports a key the schema does not have.
func (l *loader) unknown(p pair, known []string) {
	l.addf(p.path, p.keyNode.Line, "unknown key; known keys are %s", strings.Join(known, ", "))
}

// text returns a scalar as a string with ${VAR} references expanded. Integers
// are accepted as written, since ids and tokens are often all digits.
func (l *loader) text(path string, n *yaml.Node) (string, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str":
			return l.expand(path, n)
		case "!!int":
			return n.Value, true
		}
	}
	l.addf(path, n.Line, "must be a string, got %s", describe(n))
	return "", false
}

// str is text for values that must be YAML strings.
func (l *loader) str(path string, n *yaml.Node) (string, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return l.expand(path, n)
	}
	l.addf(path, n.Line, "must be a string, got %s", describe(n))
	return "", false
}

func (l *loader) expand(path string, n *yaml.Node) (string, bool) {
	s, err := expand(n.Value, os.LookupEnv)
	if err != nil {
		l.addf(path, n.Line, "%v", err)
		return "", false
	}
	return s, true
}

// scalarValue decodes a scalar for the typed settings: strings expanded,
// YAML integers, floats and booleans as Go values, anything else as written.
func (l *loader) scalarValue(path string, n *yaml.Node) (any, bool) {
	switch n.ShortTag() {
	case "!!str":
		s, ok := l.expand(path, n)
		return s, ok
	case "!!int", "!!float", "!!bool":
		var v any
		if err := n.Decode(&v); err != nil {
			l.addf(path, n.Line, "%v", err)
			return nil, false
		}
		return v, true
	case "!!null":
		return nil, true
	}
	return n.Value, true
}

// freeform decodes a plugin's config block keeping keys exactly as written.
func (l *loader) freeform(path string, n *yaml.Node, depth int) (any, bool) {
	n = resolve(n)
	if depth > maxDepth {
		l.addf(path, n.Line, "nested too deeply")
		return nil, false
	}
	if l.nodes--; l.nodes < 0 {
		if l.nodes == -1 {
			l.addf(path, n.Line, "plugin config blocks expand to more than %d values", maxFreeformNodes)
		}
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		ok := true
		for _, p := range l.pairs(path, n, depth) {
			v, vok := l.freeform(p.path, p.val, depth+1)
			m[p.key] = v
			ok = ok && vok
		}
		return m, ok
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := l.freeform(index(path, i), c, depth+1)
			s[i] = v
			ok = ok && vok
		}
		return s, ok
	case yaml.ScalarNode:
		return l.scalarValue(path, n)
	}
	return nil, true
}
