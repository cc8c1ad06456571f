package main

import (
	"context"

	"github.com/capgate/capgate/sdk"
)

// GreetIn is hello.greet's input.
type GreetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
	// Passphrase is never used: it is there to show the audit trail
	// redacting a field marked sensitive.
	Passphrase string `json:"passphrase,omitempty" capgate:"sensitive,maxLength=64" jsonschema:"unused"`
}

// GreetOut is hello.greet's output.
type GreetOut struct {
	Greeting string `json:"greeting" jsonschema:"the greeting"`
}

func newPlugin() *sdk.Plugin {
	p := sdk.New("hello", "1.0.0")
	sdk.Add(p, sdk.Tool[GreetIn, GreetOut]{
		Name: "hello.greet", Description: "Greet someone by name.",
		Kind: sdk.Read, Pack: "hello", Permission: "hello.greet", Task: sdk.TaskOptional,
		Handler: func(_ context.Context, _ sdk.Call, in GreetIn) (GreetOut, error) {
			return GreetOut{Greeting: "hello, " + in.Name}, nil
		},
	})
	return p
}

func main() { sdk.Serve(newPlugin()) }
