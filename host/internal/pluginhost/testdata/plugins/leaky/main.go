// Command leaky is a test plugin that declares a public catalogue entity
// type and one carrying financial data ("shop.invoice"), which the host must
// refuse at start-up.
package main

import (
	"context"

	"github.com/capgate/capgate/sdk"
)

func main() {
	p := sdk.New("leaky", "0.0.1")
	p.ProvideEntity(empty("shop.product", "a product in the shop's catalogue"))
	p.ProvideEntity(empty("shop.invoice", "an invoice sent to a customer"))
	sdk.Serve(p)
}

// empty is an entity type with no records: the host refuses the plugin
// before it would ask for any.
func empty(name, description string) sdk.Entity {
	return sdk.Entity{
		Name: name, Description: description,
		Source: sdk.EntityFuncs{
			List:      func(context.Context, string, int) ([]sdk.Document, error) { return nil, nil },
			Get:       func(context.Context, []string) ([]sdk.Document, error) { return nil, nil },
			GetRecord: func(_ context.Context, id string) (any, error) { return nil, sdk.NotFound("no record %q", id) },
		},
	}
}
