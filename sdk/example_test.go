package sdk_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/capgate/capgate/sdk"
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
		Pack:        "greeter",
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
	entity := sdk.Entity{
		Name:        "office.room",
		Description: "a meeting room; book it with office.book",
		Version:     "1",
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
		Record: func(ctx context.Context, id string) (any, error) {
			r, ok := find(id)
			if !ok {
				return nil, sdk.NotFound("no room %q", id)
			}
			return r, nil
		},
	}
	p := sdk.New("office", "1.0.0")
	p.ProvideEntity(entity)

	// The host pages through the documents to index them.
	page, _ := entity.List(context.Background(), "room-a", 10)
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

// A plugin whose handlers are methods of a service built in OnConfigure:
// Configured hands the service over, Handler makes each method a handler.
// A call before the plugin is configured fails with an error naming it.
func ExampleConfigured() {
	p := sdk.New("greeter", "1.0.0")
	svc := &sdk.Configured[greeterService]{Plugin: p.Name()}
	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
		var cfg struct {
			Salutation string `json:"salutation"`
		}
		if err := env.DecodeConfig(&cfg); err != nil {
			return err
		}
		svc.Set(&greeterService{salutation: cfg.Salutation})
		return nil
	})
	greet := sdk.Handler(svc, (*greeterService).Greet)
	sdk.Add(p, sdk.Tool[GreetIn, GreetOut]{
		Name: "greeter.greet", Kind: sdk.Read, Pack: "greeter", Permission: "greeter.use",
		Handler: greet,
	})

	ctx := context.Background()
	_, err := greet(ctx, sdk.Call{}, GreetIn{Name: "Ada"})
	fmt.Println(err)
	svc.Set(&greeterService{salutation: "good morning"}) // what OnConfigure does
	out, _ := greet(ctx, sdk.Call{}, GreetIn{Name: "Ada"})
	fmt.Println(out.Greeting)
	// Output:
	// greeter plugin is not configured
	// good morning, Ada
}
