package rest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/rest"
)

// A Handler serves principals its caller has authenticated; here every
// request is alice's. Her own booking comes back as the result itself, and
// bob's is refused by the gate as a problem naming the step.
func Example() {
	platform := mcptest.New()
	h := rest.New(platform.Dispatcher, rest.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := strings.CutPrefix(r.URL.Path, rest.CapabilitiesPath+"/")
		h.ServeCall(w, r, mcptest.Alice, name)
	}))
	defer srv.Close()

	for _, id := range []string{"b-1", "b-2"} {
		resp, err := http.Post(srv.URL+rest.CapabilitiesPath+"/booking.get", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
		fmt.Println(string(body))
	}
	// Output:
	// 200 application/json
	// {"id":"b-1","owner":"u-alice","title":"Dentist","cancelled":false}
	// 403 application/problem+json
	// {"type":"about:blank","title":"Forbidden","status":403,"detail":"the target does not belong to this token's user","step":"ownership","reason":"the target does not belong to this token's user","capability":"booking.get"}
}
