package auth_test

import (
	"fmt"
	"strings"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
)

func ExampleStore_Authenticate() {
	cfg, err := config.Parse([]byte(`
roles:
  support: ["booking.read", "booking.cancel"]
tokens:
  - token: cg_example-token-for-docs
    role: support
    scope: action
    user_id: "1042"
`), "")
	if err != nil {
		panic(err)
	}
	store := auth.New(cfg.Tokens)

	p, ok := store.Authenticate("Bearer cg_example-token-for-docs")
	fmt.Println(ok, p.Role, p.Scope, p.UserID)

	_, ok = store.Authenticate("Bearer cg_some-other-token")
	fmt.Println(ok)
	// Output:
	// true support action 1042
	// false
}

func ExampleNewToken() {
	token, sha256hex, err := auth.NewToken()
	if err != nil {
		panic(err)
	}
	// Hand token to the client once; put only the hash in the config:
	//   tokens:
	//     - token_sha256: <sha256hex>
	fmt.Println(strings.HasPrefix(token, auth.TokenPrefix), len(token), len(sha256hex))
	// Output: true 46 64
}

func ExampleHashToken() {
	// The digest to configure as token_sha256 for this token:
	fmt.Println(auth.HashToken("cg_example-token-for-docs"))
	// Output: f8bb91c575d00b6d9fc195369584a102564512553d5b57c606622d60f208336e
}
