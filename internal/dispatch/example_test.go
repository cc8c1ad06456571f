package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// notebook is a plugin's side of the gate: it keeps notes, each owned by a
// user, and answers the two questions the gate asks.
type notebook struct{ notes map[string]note }

type note struct{ Owner, Text string }

// Invoke runs a call the gate admitted. The gate leaves the ownership
// step to the provider, which alone knows who owns a note: r.Owned refuses
// a caller who is not the owner, before anything runs.
func (n notebook) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	var a struct{ ID string }
	_ = json.Unmarshal(r.Args, &a) // the gate has validated the arguments already
	nt, ok := n.notes[a.ID]
	if !ok {
		return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: fmt.Sprintf("no note %q", a.ID)}
	}
	if err := r.Owned(nt.Owner); err != nil {
		return nil, err
	}
	switch r.Capability {
	case "notes.read":
		return json.Marshal(nt.Text)
	case "notes.erase":
		delete(n.notes, a.ID)
		return json.RawMessage(`"erased"`), nil
	}
	return nil, fmt.Errorf("no capability %q", r.Capability)
}

// The gate in use: a plugin declares two capabilities, the operator's
// policy decides who may call what, and every call, whatever protocol
// carried it, goes through Invoke. Whatever Invoke refuses, the plugin
// never hears of.
func Example() {
	byID := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)
	reg := registry.New([]string{"notes"})
	for _, c := range []registry.Capability{
		{Name: "notes.read", Kind: registry.Read, InputSchema: byID, Pack: "notes", Permission: "notes.read", OwnerGuarded: true, Plugin: "notebook"},
		{Name: "notes.erase", Kind: registry.Action, InputSchema: byID, Pack: "notes", Permission: "notes.write", OwnerGuarded: true, Destructive: true, Plugin: "notebook"},
	} {
		if err := reg.Add(c); err != nil {
			panic(err)
		}
	}
	book := notebook{notes: map[string]note{
		"n-1": {Owner: "u-ada", Text: "buy milk"},
		"n-2": {Owner: "u-bo", Text: "call mum"},
	}}
	gate, err := dispatch.New(reg, dispatch.Policy{
		Packs: map[string]bool{"notes": true},
		Roles: map[string][]string{"writer": {"notes.*"}, "support": {"*"}},
	}, map[string]dispatch.Provider{"notebook": book})
	if err != nil {
		panic(err)
	}

	ada := dispatch.Principal{Role: "writer", Scope: dispatch.ScopeAction, UserID: "u-ada"}
	adaReadOnly := dispatch.Principal{Role: "writer", Scope: dispatch.ScopeRead, UserID: "u-ada"}
	support := dispatch.Principal{Role: "support", Scope: dispatch.ScopeAdmin, UserID: "u-help"}

	// tools/list: what each principal may call before arguments matter.
	for _, p := range []dispatch.Principal{ada, adaReadOnly} {
		var names []string
		for _, e := range gate.Visible(p) {
			names = append(names, e.Name)
		}
		fmt.Printf("%s token sees %v\n", p.Scope, names)
	}

	// tools/call
	call := func(who string, p dispatch.Principal, capability, args string) {
		out, err := gate.Invoke(context.Background(), p, capability, json.RawMessage(args))
		var refusal *dispatch.Refusal
		var toolErr *dispatch.ToolError
		switch {
		case errors.As(err, &refusal):
			fmt.Printf("%s %s: refused at %s\n", who, capability, refusal.Step)
		case errors.As(err, &toolErr):
			fmt.Printf("%s %s: %s\n", who, capability, toolErr.Message)
		case err != nil:
			fmt.Printf("%s %s: %v\n", who, capability, err)
		default:
			fmt.Printf("%s %s: %s\n", who, capability, out)
		}
	}
	call("ada", ada, "notes.read", `{"id":"n-1"}`)
	call("ada", ada, "notes.read", `{"id":"n-2"}`)
	call("ada", adaReadOnly, "notes.erase", `{"id":"n-1"}`)
	call("ada", ada, "notes.erase", `{"id":1}`)
	call("ada", ada, "notes.erase", `{"id":"n-9"}`)
	call("support", support, "notes.erase", `{"id":"n-2"}`)
	call("ada", ada, "notes.share", `{}`)
	// Output:
	// action token sees [notes.erase notes.read]
	// read token sees [notes.read]
	// ada notes.read: "buy milk"
	// ada notes.read: refused at ownership
	// ada notes.erase: refused at scope
	// ada notes.erase: invalid arguments for notes.erase: validating root: validating /properties/id: type: 1 has type "integer", want "string"
	// ada notes.erase: no note "n-9"
	// support notes.erase: "erased"
	// ada notes.share: unknown capability "notes.share"
}
