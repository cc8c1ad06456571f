package main

import (
	"github.com/capgate/capgate/plugins/search/internal/index"
	"github.com/capgate/capgate/plugins/search/internal/search"
	"github.com/capgate/capgate/sdk"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	index.TuneGC()
	p := sdk.New("search", version)
	search.Register(p)
	sdk.Serve(p)
}
