package sdk_test

import (
	"context"
	"fmt"
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
