// Command crash is a test plugin that dies before the handshake.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "fatal error: cannot open the frobnicator")
	os.Exit(3)
}
