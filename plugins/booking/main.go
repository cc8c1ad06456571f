package main

import (
	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	p := sdk.New("booking", version)
	booking.Register(p)
	sdk.Serve(p)
}
