package main

import (
	"github.com/capgate/capgate/plugins/llm/internal/llm"
	"github.com/capgate/capgate/sdk"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	p := sdk.New("llm", version)
	llm.Register(p, llm.Options{})
	sdk.Serve(p)
}
