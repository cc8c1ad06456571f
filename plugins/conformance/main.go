package main

import (
	"github.com/capgate/capgate/plugins/conformance/internal/fixtures"
	"github.com/capgate/capgate/sdk"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	p := sdk.New("conformance", version)
	fixtures.Register(p)
	sdk.Serve(p)
}
