// Command capgate-plugin-synthetic provides a generated catalogue, the
// entity type synthetic.item, of any size up to a million documents, for
// benchmarks of the search pack. It has no capabilities.
//
// Config:
//
//	documents: 100000   # how many items (1 to 1 000 000)
//	seed: 42            # generator seed; the same seed gives the same items
package main

import (
	"github.com/capgate/capgate/bench/plugins/synthetic/internal/synthetic"
	"github.com/capgate/capgate/sdk"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	p := sdk.New("synthetic", version)
	synthetic.Register(p)
	sdk.Serve(p)
}
