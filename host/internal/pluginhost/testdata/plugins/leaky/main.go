// Command leaky is a test plugin that declares a public catalogue entity
// type and one carrying financial data ("shop.invoice"), which the host must
// refuse at start-up.
package main

import "github.com/capgate/capgate/sdk"

func main() {
	p := sdk.New("leaky", "0.0.1")
	p.ProvideEntity("shop.product", "a product in the shop's catalogue")
	p.ProvideEntity("shop.invoice", "an invoice sent to a customer")
	sdk.Serve(p)
}
