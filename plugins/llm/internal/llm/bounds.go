package llm

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/capgate/capgate/sdk"
)

// The limits llm.ask enforces, read from AskIn's capgate tags (a tag
// cannot name a constant): what agents are told and what the plugin
// refuses are one definition and cannot drift apart.
var (
	// maxQuestionLen bounds the question, in characters.
	maxQuestionLen = askBound("Question", "maxLength")
	// maxEntityLen bounds the entity type, in characters.
	maxEntityLen = askBound("Entity", "maxLength")
	// minMaxSources and maxMaxSources are max_sources' range (0: omitted).
	minMaxSources = askBound("MaxSources", "minimum")
	maxMaxSources = askBound("MaxSources", "maximum")
)

// askBound is the value key has in the capgate tag of AskIn's field. It
// panics when there is none: the plugin would enforce nothing.
func askBound(field, key string) int {
	f, ok := reflect.TypeFor[AskIn]().FieldByName(field)
	if !ok {
		panic(fmt.Sprintf("llm: AskIn has no field %s", field))
	}
	for _, kv := range strings.Split(f.Tag.Get(sdk.BoundsTag), ",") {
		if k, v, _ := strings.Cut(strings.TrimSpace(kv), "="); k == key {
			n, err := strconv.Atoi(v)
			if err != nil {
				panic(fmt.Sprintf("llm: AskIn.%s: %s tag %s=%q is not a whole number", field, sdk.BoundsTag, key, v))
			}
			return n
		}
	}
	panic(fmt.Sprintf("llm: AskIn.%s declares no %s in its %s tag", field, key, sdk.BoundsTag))
}
