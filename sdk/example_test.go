package sdk_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type GreetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type GreetOut struct {
	Greeting string `json:"greeting"`
}

// A complete plugin: one read capability with a typed handler. In a real
// plugin's main, the last line would be sdk.Serve(p).
func Example() {
	p := sdk.New("greeter", "1.0.0")
	sdk.Add(p, sdk.Tool[GreetIn, GreetOut]{
		Name:        "greeter.greet",
		Description: "Greet someone by name.",
		Kind:        sdk.Read,
		Permission:  "greeter.use",
		Handler: func(ctx context.Context, call sdk.Call, in GreetIn) (GreetOut, error) {
			if strings.TrimSpace(in.Name) == "" {
				return GreetOut{}, sdk.InvalidInput("name must not be empty")
			}
			return GreetOut{Greeting: "hello, " + in.Name}, nil
		},
	})
	fmt.Println(p.Name())
	// Output: greeter
}

// room is a record the example plugin owns.
type room struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Seats int    `json:"seats"`
}

// A plugin that provides a catalogue entity type: its documents are what
// search indexes, its records what platform.get returns. The rooms here
// are sorted by id, as List must page them.
func ExamplePlugin_ProvideEntity() {
	rooms := []room{
		{ID: "room-a", Name: "Aurora", Seats: 8},
		{ID: "room-b", Name: "Borealis", Seats: 3},
		{ID: "room-c", Name: "Cirrus", Seats: 16},
	}
	doc := func(r room) sdk.Document {
		return sdk.Document{ID: r.ID, Title: r.Name, Body: fmt.Sprintf("Meeting room for %d.", r.Seats)}
	}
	find := func(id string) (room, bool) {
		i, ok := slices.BinarySearchFunc(rooms, id, func(r room, id string) int { return strings.Compare(r.ID, id) })
		if !ok {
			return room{}, false
		}
		return rooms[i], true
	}
	source := sdk.EntityFuncs{
		List: func(ctx context.Context, after string, limit int) ([]sdk.Document, error) {
			var docs []sdk.Document
			for _, r := range rooms {
				if r.ID > after && len(docs) < limit {
					docs = append(docs, doc(r))
				}
			}
			return docs, nil
		},
		Get: func(ctx context.Context, ids []string) ([]sdk.Document, error) {
			var docs []sdk.Document
			for _, id := range ids {
				if r, ok := find(id); ok {
					docs = append(docs, doc(r))
				}
			}
			return docs, nil
		},
		GetRecord: func(ctx context.Context, id string) (any, error) {
			r, ok := find(id)
			if !ok {
				return nil, sdk.NotFound("no room %q", id)
			}
			return r, nil
		},
	}
	p := sdk.New("office", "1.0.0")
	p.ProvideEntity(sdk.Entity{
		Name:        "office.room",
		Description: "a meeting room; book it with office.book",
		Version:     "1",
		Source:      source,
	})

	// The host pages through the documents to index them.
	page, _ := source.Documents(context.Background(), "room-a", 10)
	for _, d := range page {
		fmt.Println(d.ID, d.Title, d.Body)
	}
	// Output:
	// room-b Borealis Meeting room for 3.
	// room-c Cirrus Meeting room for 16.
}

// greeterService is what the example plugin builds once configured.
type greeterService struct{ salutation string }

func (s *greeterService) Greet(ctx context.Context, call sdk.Call, in GreetIn) (GreetOut, error) {
	return GreetOut{Greeting: s.salutation + ", " + in.Name}, nil
}

// A plugin whose handlers are methods of a service built from its config
// block: Configure decodes the block (strictly: an unknown key fails the
// host's start-up) and builds the service, Method makes each method a
// handler. The call runs through the host's gate, as in production.
func ExampleConfigure() {
	t := exampleT() // in a test, the *testing.T
	defer t.cleanup()

	p := sdk.New("greeter", "1.0.0")
	svc := sdk.Configure(p, func(ctx context.Context, env sdk.Env, cfg struct {
		Salutation string `json:"salutation"`
	}) (*greeterService, error) {
		return &greeterService{salutation: cfg.Salutation}, nil
	})
	sdk.Add(p, sdk.Tool[GreetIn, GreetOut]{
		Name: "greeter.greet", Kind: sdk.Read, Permission: "greeter.use",
		Handler: sdk.Method(svc, (*greeterService).Greet),
	})

	c := sdktest.Start(t, p, map[string]string{"salutation": "good morning"})
	anyone := sdk.Principal{Role: "guest", Scope: sdk.ScopeRead}
	out, err := c.Invoke(context.Background(), "greeter.greet", anyone, GreetIn{Name: "Ada"})
	fmt.Println(string(out), err)
	_, err = sdktest.StartErr(t, p, map[string]string{"salutaton": "hi"})
	fmt.Println(err)
	// Output:
	// {"greeting":"good morning, Ada"} <nil>
	// configure: greeter config: json: unknown field "salutaton"
}

type noteID struct {
	ID string `json:"id" capgate:"maxLength=32"`
}

type noteText struct {
	Text string `json:"text"`
}

// An owner-guarded capability: Owner names the user a note belongs to, and
// the gate refuses everyone else before the handler runs (admin scope
// excepted). A plugin's own tests assert each refusal of the gate through
// package sdktest, as here.
func ExampleTool_owner() {
	t := exampleT() // in a test, the *testing.T
	defer t.cleanup()

	notes := map[string]struct{ owner, text string }{"n1": {"alice", "buy milk"}}
	p := sdk.New("notes", "1.0.0")
	sdk.Add(p, sdk.Tool[noteID, noteText]{
		Name: "notes.read", Description: "Read one of your notes.", Kind: sdk.Read, Permission: "notes.read",
		Owner: func(ctx context.Context, call sdk.Call, in noteID) (string, error) {
			n, ok := notes[in.ID]
			if !ok {
				return "", sdk.NotFound("no note %q", in.ID)
			}
			return n.owner, nil
		},
		Handler: func(ctx context.Context, call sdk.Call, in noteID) (noteText, error) {
			return noteText{Text: notes[in.ID].text}, nil
		},
	})

	h := sdktest.NewHost(t)
	h.Roles = map[string][]string{"customer": {"notes.*"}, "guest": {}}
	c, _ := h.Add(p, nil, "")
	_ = h.Start(context.Background(), false)
	ctx := context.Background()
	for _, who := range []sdk.Principal{
		{Role: "customer", Scope: sdk.ScopeRead, UserID: "alice"},
		{Role: "customer", Scope: sdk.ScopeRead, UserID: "bob"},
		{Role: "guest", Scope: sdk.ScopeRead, UserID: "alice"},
		{Role: "customer", Scope: sdk.ScopeAdmin, UserID: "ops"},
	} {
		out, err := c.Invoke(ctx, "notes.read", who, noteID{ID: "n1"})
		fmt.Printf("%s (%s): %s %v [step %q]\n", who.UserID, who.Role, out, err, sdk.RefusedAt(err))
	}
	_, err := c.Invoke(ctx, "notes.read", sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: "bob"}, noteID{ID: "n9"})
	fmt.Println(sdk.IsNotFound(err), err)
	// Output:
	// alice (customer): {"text":"buy milk"} <nil> [step ""]
	// bob (customer):  notes.read refused at ownership: the target does not belong to this token's user [step "ownership"]
	// alice (guest):  notes.read refused at permission: role "guest" does not hold permission "notes.read" [step "permission"]
	// ops (customer): {"text":"buy milk"} <nil> [step ""]
	// true no note "n9"
}
