// Package gen generates the synthetic catalogue: documents that are a pure
// function of their position, so any page of a catalogue of millions can be
// produced without holding the others.
//
// The vocabulary is that of a leisure centre's catalogue (bookable rooms,
// desks, courts and studios; subscription plans; classes), so one- and
// two-word queries match a realistic share of the documents: a feature
// such as "whiteboard" a few percent, a class level a third of the classes,
// a title number one document.
package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// MaxDocuments is the largest catalogue: ids have six digits.
const MaxDocuments = 1_000_000

// idPrefix starts every id; the number after it is zero-padded to six
// digits, so ids sort in the order of their numbers.
const idPrefix = "item-"

// Word lists. They are the ones the search index's own benchmark uses.
var (
	names    = []string{"Cedar", "Maple", "Birch", "Willow", "Oak", "Elm", "Ash", "Pine", "Juniper", "Hazel", "Rowan", "Alder", "Linden", "Spruce", "Poplar"}
	adjs     = []string{"Quiet", "Bright", "Spacious", "Cosy", "Modern", "Sunny", "Compact", "Airy"}
	wings    = []string{"north", "south", "east", "west", "garden"}
	kinds    = []string{"room", "desk", "court", "studio"}
	features = map[string][]string{
		"room":   {"a large screen", "a whiteboard", "natural light", "air conditioning", "a coffee machine", "blackout blinds", "a round table"},
		"desk":   {"a standing desk", "a second monitor", "a desk lamp", "a lockable drawer", "natural light", "a docking station"},
		"court":  {"floodlights", "a sprung floor", "showers nearby", "lockers", "spectator seating", "racket hire"},
		"studio": {"mirrors", "a sprung floor", "a sound system", "yoga mats", "blackout blinds", "a piano"},
	}
	sports  = []string{"tennis", "squash", "badminton", "basketball", "volleyball", "padel"}
	tiers   = []string{"Basic", "Standard", "Premium", "Family", "Student", "Business"}
	periods = []string{"monthly", "annual", "weekly"}
	perks   = []string{"unlimited bookings", "two guest passes", "priority support", "free towel service", "off-peak access", "court time", "class credits", "a locker"}
	classes = []string{"Yoga", "Pilates", "Spinning", "Boxing", "Zumba", "Rowing", "Climbing", "Swimming", "Circuit training"}
	levels  = []string{"beginners", "intermediate", "advanced"}
	coaches = []string{"Anna", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hugo"}
)

// Item is one generated catalogue record.
type Item struct {
	ID          string            `json:"id"`
	Kind        string            `json:"kind"` // resource, plan or class
	Title       string            `json:"title"`
	Description string            `json:"description"`
	Fields      map[string]string `json:"fields"`
}

// ID is the id of the item at position i.
func ID(i int) string {
	return fmt.Sprintf("%s%06d", idPrefix, i)
}

// Parse returns the position named by id, or false when id is not an id
// this package generates (wrong prefix, not six digits).
func Parse(id string) (int, bool) {
	num, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(num) != 6 {
		return 0, false
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Generate returns the item at position i of the catalogue with seed. It
// depends on nothing else: the same i and seed give the same item.
func Generate(i int, seed uint64) Item {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	it := Item{ID: ID(i)}
	switch i % 4 {
	case 0, 1:
		// The resources' own sequence (positions 0, 1, 4, 5, 8, …)
		// cycles through the kinds.
		kind := kinds[((i/4)*2+i%4)%len(kinds)]
		feats := features[kind]
		name := pick(names)
		it.Kind = "resource"
		it.Title = fmt.Sprintf("%s %s %d", name, kind, i)
		if kind == "court" {
			it.Title = fmt.Sprintf("%s %s court %d", name, pick(sports), i)
		}
		f1, f2 := pick(feats), pick(feats)
		for f2 == f1 {
			f2 = pick(feats)
		}
		it.Description = fmt.Sprintf("%s %s with %s and %s, for up to %d people.", pick(adjs), kind, f1, f2, 1+r.IntN(20))
		it.Fields = map[string]string{
			"location": fmt.Sprintf("%s wing, floor %d", pick(wings), r.IntN(6)),
			"kind":     kind,
		}
	case 2:
		tier, period := pick(tiers), pick(periods)
		p1, p2 := pick(perks), pick(perks)
		it.Kind = "plan"
		it.Title = fmt.Sprintf("%s %s plan %d", tier, period, i)
		it.Description = fmt.Sprintf("%s %s subscription including %s and %s.", tier, period, p1, p2)
		it.Fields = map[string]string{"tier": strings.ToLower(tier)}
	case 3:
		class, level := pick(classes), pick(levels)
		it.Kind = "class"
		it.Title = fmt.Sprintf("%s for %s %d", class, level, i)
		it.Description = fmt.Sprintf("%s class for %s led by %s, %d minutes, in the %s wing studio.", class, level, pick(coaches), 30+15*r.IntN(4), pick(wings))
		it.Fields = map[string]string{"coach": pick(coaches)}
	}
	return it
}

// Catalogue is n generated items with one seed.
type Catalogue struct {
	N    int
	Seed uint64
}

// After returns up to limit items whose id sorts after after (byte order;
// "" starts at the first), in id order.
func (c Catalogue) After(after string, limit int) []Item {
	// Ids sort like their positions, so the first one after "after" is
	// found by bisection, whatever string "after" is.
	lo, hi := 0, c.N
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ID(mid) > after {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	end := min(c.N, lo+max(limit, 0))
	out := make([]Item, 0, end-lo)
	for i := lo; i < end; i++ {
		out = append(out, Generate(i, c.Seed))
	}
	return out
}

// Get returns the item id names, or false when there is none.
func (c Catalogue) Get(id string) (Item, bool) {
	i, ok := Parse(id)
	if !ok || i >= c.N {
		return Item{}, false
	}
	return Generate(i, c.Seed), true
}
