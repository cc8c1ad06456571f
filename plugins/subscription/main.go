package main

import (
	"github.com/capgate/capgate/plugins/subscription/internal/subscription"
	"github.com/capgate/capgate/sdk"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	p := sdk.New("subscription", version)
	subscription.Register(p)
	sdk.Serve(p)
}
