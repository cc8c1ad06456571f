package index

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Word lists for the generated catalogue. None of them contains the words
// that make the hand-written documents below unique (aurora, zephyr,
// kettlebell, marigold, harbourside, projector, conference), so the expected
// top hits of the relevance cases are known by construction.
var (
	genNames    = []string{"Cedar", "Maple", "Birch", "Willow", "Oak", "Elm", "Ash", "Pine", "Juniper", "Hazel", "Rowan", "Alder", "Linden", "Spruce", "Poplar"}
	genAdjs     = []string{"Quiet", "Bright", "Spacious", "Cosy", "Modern", "Sunny", "Compact", "Airy"}
	genWings    = []string{"north", "south", "east", "west", "garden"}
	genKinds    = []string{"room", "desk", "court", "studio"}
	genFeatures = map[string][]string{
		"room":   {"a large screen", "a whiteboard", "natural light", "air conditioning", "a coffee machine", "blackout blinds", "a round table"},
		"desk":   {"a standing desk", "a second monitor", "a desk lamp", "a lockable drawer", "natural light", "a docking station"},
		"court":  {"floodlights", "a sprung floor", "showers nearby", "lockers", "spectator seating", "racket hire"},
		"studio": {"mirrors", "a sprung floor", "a sound system", "yoga mats", "blackout blinds", "a piano"},
	}
	genSports  = []string{"tennis", "squash", "badminton", "basketball", "volleyball", "padel"}
	genTiers   = []string{"Basic", "Standard", "Premium", "Family", "Student", "Business"}
	genPeriods = []string{"monthly", "annual", "weekly"}
	genPerks   = []string{"unlimited bookings", "two guest passes", "priority support", "free towel service", "off-peak access", "court time", "class credits", "a locker"}
	genClasses = []string{"Yoga", "Pilates", "Spinning", "Boxing", "Zumba", "Rowing", "Climbing", "Swimming", "Circuit training"}
	genLevels  = []string{"beginners", "intermediate", "advanced"}
	genCoaches = []string{"Anna", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hugo"}
)

// Entities of the fixture catalogue.
const (
	entResource = "booking.resource"
	entPlan     = "subscription.plan"
	entClass    = "course.class"
)

// generate returns n generated documents, deterministically from seed:
// half bookable resources, a quarter plans and a quarter classes.
func generate(n int, seed uint64) []Document {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	docs := make([]Document, 0, n)
	for i := range n {
		var d Document
		switch i % 4 {
		case 0, 1:
			kind := genKinds[(i/2)%len(genKinds)]
			feats := genFeatures[kind]
			name := pick(genNames)
			title := fmt.Sprintf("%s %s %d", name, kind, i)
			if kind == "court" {
				title = fmt.Sprintf("%s %s court %d", name, pick(genSports), i)
			}
			f1, f2 := pick(feats), pick(feats)
			for f2 == f1 {
				f2 = pick(feats)
			}
			d = Document{
				Entity: entResource,
				ID:     fmt.Sprintf("r%d", i),
				Title:  title,
				Body:   fmt.Sprintf("%s %s with %s and %s, for up to %d people.", pick(genAdjs), kind, f1, f2, 1+r.IntN(20)),
				Fields: map[string]string{
					"location": fmt.Sprintf("%s wing, floor %d", pick(genWings), r.IntN(6)),
					"kind":     kind,
				},
			}
		case 2:
			tier, period := pick(genTiers), pick(genPeriods)
			p1, p2 := pick(genPerks), pick(genPerks)
			d = Document{
				Entity: entPlan,
				ID:     fmt.Sprintf("p%d", i),
				Title:  fmt.Sprintf("%s %s plan %d", tier, period, i),
				Body:   fmt.Sprintf("%s %s subscription including %s and %s.", tier, period, p1, p2),
				Fields: map[string]string{"tier": strings.ToLower(tier)},
			}
		case 3:
			class, level := pick(genClasses), pick(genLevels)
			d = Document{
				Entity: entClass,
				ID:     fmt.Sprintf("c%d", i),
				Title:  fmt.Sprintf("%s for %s %d", class, level, i),
				Body:   fmt.Sprintf("%s class for %s led by %s, %d minutes, in the %s wing studio.", class, level, pick(genCoaches), 30+15*r.IntN(4), pick(genWings)),
				Fields: map[string]string{"coach": pick(genCoaches)},
			}
		}
		docs = append(docs, d)
	}
	return docs
}

// Hand-written documents with a known place in the rankings.
var (
	docAurora = Document{
		Entity: entResource, ID: "aurora",
		Title:  "Aurora conference room",
		Body:   "Aurora conference room with a projector, a whiteboard and seating for twelve.",
		Fields: map[string]string{"location": "north wing, floor 3", "kind": "room"},
	}
	// docDecoy holds every word of the phrase "conference room with a
	// projector" but not in that order.
	docDecoy = Document{
		Entity: entResource, ID: "decoy",
		Title: "Cedar boardroom",
		Body:  "A room with a projector for a conference of up to eight people.",
	}
	docZephyr = Document{
		Entity: entPlan, ID: "zephyr",
		Title: "Zephyr annual plan",
		Body:  "Annual subscription with unlimited bookings and two guest passes.",
	}
	docKettlebell = Document{
		Entity: entClass, ID: "kettlebell",
		Title: "Kettlebell basics",
		Body:  "Swing, clean and press: kettlebell technique for beginners.",
	}
	// docMarigoldTitle has "marigold" in its title, docMarigoldBody in its
	// body only: the title match must rank first.
	docMarigoldTitle = Document{
		Entity: entResource, ID: "marigold-studio",
		Title: "Marigold studio",
		Body:  "Bright recording studio with a piano and acoustic panels.",
	}
	docMarigoldBody = Document{
		Entity: entResource, ID: "garden-desk",
		Title: "Garden desk",
		Body:  "Hot desk next to the marigold planters by the window.",
	}
	docHarbour = Document{
		Entity: entResource, ID: "court-h",
		Title:  "Tennis court H",
		Body:   "Indoor hard court with floodlights.",
		Fields: map[string]string{"location": "Harbourside sports hall"},
	}
)

// fixture is the relevance catalogue: 240 generated documents plus the
// hand-written ones.
func fixture() []Document {
	docs := generate(240, 42)
	return append(docs, docAurora, docDecoy, docZephyr, docKettlebell, docMarigoldTitle, docMarigoldBody, docHarbour)
}
