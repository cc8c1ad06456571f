package catalogue

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// AlwaysBlocked are the entity types refused whatever the configuration
// says, because records of them carry personal or financial data. A dotted
// name whose last segment is one of them is refused likewise.
var AlwaysBlocked = []string{"invoice", "user"}

// Errors Add wraps, for errors.Is.
var (
	ErrInvalidName = errors.New("invalid entity type name")
	ErrBlocked     = errors.New("entity type carries personal or financial data and may not be provided")
	ErrDuplicate   = errors.New("entity type already provided")
)

var entityName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// ValidName reports whether name is a well-formed entity type name:
// lower-case dotted segments such as "booking.resource".
func ValidName(name string) bool { return entityName.MatchString(name) }

// Catalogue maps each registered entity type to the plugin providing it.
// Build it at start-up; it is not safe for concurrent Add, but lookups on a
// built Catalogue are safe from any goroutine.
type Catalogue struct {
	blocked  []blockRule
	provider map[string]string
}

type blockRule struct {
	name   string
	source string // why the name is blocked, for the error
}

// New returns an empty catalogue that refuses AlwaysBlocked and blocked
// (the operator's search.blocked_entities). A blocked name refuses the
// entity type of that exact name and any dotted name ending in it:
// "customer" refuses "customer" and "crm.customer".
func New(blocked []string) *Catalogue {
	c := &Catalogue{provider: map[string]string{}}
	for _, b := range AlwaysBlocked {
		c.blocked = append(c.blocked, blockRule{name: b, source: "always blocked"})
	}
	for _, b := range blocked {
		c.blocked = append(c.blocked, blockRule{name: b, source: "blocked by search.blocked_entities"})
	}
	return c
}

// Add registers plugin as the provider of entity. It fails, naming plugin
// and entity, when the name is malformed, when the type is blocked, or when
// another plugin already provides it.
func (c *Catalogue) Add(plugin, entity string) error {
	if !ValidName(entity) {
		return fmt.Errorf("plugin %q declares entity type %q: %w: must match %s", plugin, entity, ErrInvalidName, entityName)
	}
	for _, b := range c.blocked {
		if entity == b.name || strings.HasSuffix(entity, "."+b.name) {
			return fmt.Errorf("plugin %q declares entity type %q: %w (%q is %s)", plugin, entity, ErrBlocked, b.name, b.source)
		}
	}
	if other, dup := c.provider[entity]; dup {
		return fmt.Errorf("plugin %q declares entity type %q: %w by plugin %q", plugin, entity, ErrDuplicate, other)
	}
	c.provider[entity] = plugin
	return nil
}

// Provider returns the plugin that provides entity.
func (c *Catalogue) Provider(entity string) (plugin string, ok bool) {
	plugin, ok = c.provider[entity]
	return plugin, ok
}

// Entities returns every registered entity type, sorted.
func (c *Catalogue) Entities() []string {
	out := make([]string, 0, len(c.provider))
	for e := range c.provider {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}
