package registry_test

import (
	"encoding/json"
	"fmt"

	"github.com/capgate/capgate/internal/registry"
)

// A registry is filled once at start-up from the plugins' declarations. Add
// refuses a declaration the host could not serve, saying which capability
// and what is wrong, so the host can refuse to start with that message.
func ExampleRegistry_Add() {
	reg := registry.New([]string{"booking", "search"})

	err := reg.Add(registry.Capability{
		Name:        "booking.cancel",
		Description: "Cancel one of your bookings.",
		Kind:        registry.Action,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		Pack:        "booking", Permission: "booking.cancel", OwnerGuarded: true,
		Plugin: "desk",
	})
	fmt.Println("booking.cancel:", err)

	err = reg.Add(registry.Capability{
		Name: "booking.cancel", Kind: registry.Action, Pack: "booking", Plugin: "rival",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	})
	fmt.Println(err)

	err = reg.Add(registry.Capability{
		Name: "parking.find", Kind: registry.Read, Pack: "parking", Plugin: "rival",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	})
	fmt.Println(err)

	err = reg.Add(registry.Capability{
		Name: "search.query", Kind: registry.Read, Pack: "search", Plugin: "finder",
		InputSchema: json.RawMessage(`{"type":"string"}`),
	})
	fmt.Println(err)

	// Declarations arrive in any order; All lists them by name.
	for _, c := range []registry.Capability{
		{Name: "search.query", Kind: registry.Read, Pack: "search", Plugin: "finder", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "booking.book", Kind: registry.Action, Pack: "booking", Plugin: "desk", InputSchema: json.RawMessage(`{"type":"object"}`)},
	} {
		if err := reg.Add(c); err != nil {
			panic(err)
		}
	}
	for _, e := range reg.All() {
		fmt.Printf("%s (%s, from %s)\n", e.Name, e.Kind, e.Plugin)
	}
	// Output:
	// booking.cancel: <nil>
	// capability "booking.cancel": already provided by plugin "desk"
	// capability "parking.find": unknown pack "parking" (known: booking, search)
	// capability "search.query": input schema: type must be "object", got "string"
	// booking.book (action, from desk)
	// booking.cancel (action, from desk)
	// search.query (read, from finder)
}

// Arguments are checked against the input schema before any plugin sees
// them. A missing body stands for the empty object.
func ExampleEntry_ValidateArgs() {
	reg := registry.New([]string{"booking"})
	if err := reg.Add(registry.Capability{
		Name: "booking.get", Kind: registry.Read, Pack: "booking", Plugin: "desk",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`),
	}); err != nil {
		panic(err)
	}
	get, _ := reg.Lookup("booking.get")

	for _, args := range []string{`{"id":"b-1"}`, `{"id":1}`, `null`, `{"id":"b-1","as":"u-bob"}`, `["b-1"]`} {
		fmt.Printf("%-26s %v\n", args, get.ValidateArgs(json.RawMessage(args)))
	}
	// Output:
	// {"id":"b-1"}               <nil>
	// {"id":1}                   validating root: validating /properties/id: type: 1 has type "integer", want "string"
	// null                       validating root: required: missing properties: ["id"]
	// {"id":"b-1","as":"u-bob"}  validating root: unexpected additional properties ["as"]
	// ["b-1"]                    arguments must be a JSON object
}
