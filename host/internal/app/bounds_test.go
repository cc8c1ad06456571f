package app_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/platform"
)

// TestBundledCapabilitiesDeclareInputBounds: every capability of the bundled
// plugins (and the host's own events.poll) bounds every string, array and
// open object of its input, so the host starts without the start-up
// warning about unbounded inputs, and the schemas agents read in
// tools/list say so place by place. Every input and output schema also
// takes the gate's fast check, so no bundled call pays the general
// validator's price when its values are valid.
func TestBundledCapabilitiesDeclareInputBounds(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-admin-1, role: admin, scope: admin, user_id: ops}]
roles: {admin: ["*"]}
packs: {booking: true, subscription: true, search: true, llm: true, hello: true, events: true}
plugins:
  - {name: booking, path: %s}
  - {name: subscription, path: %s}
  - {name: search, path: %s}
  - name: llm
    path: %s
    config:
      connection: test
      connections: [{slug: test, kind: openai, base_url: "http://127.0.0.1:9/v1", model: test-model}]
  - {name: hello, path: %s}
`, t.TempDir(), bookingBin, subscriptionBin, searchBin, llmBin, helloBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{}
	addr, _ := serveSearch(t, cfg, sink)

	if n := strings.Count(sink.String(), "has no declared bounds"); n != 0 {
		t.Errorf("start-up warned %d time(s) about unbounded inputs:\n%s", n, sink.records("capability input has no declared bounds; only http.max_body_bytes limits it"))
	}

	res, rpcErr := rpc(t, addr, "test-admin-1", "tools/list", map[string]any{})
	if rpcErr != nil {
		t.Fatalf("tools/list: %v", rpcErr)
	}
	var list struct {
		Tools []struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	raw, _ := json.Marshal(res)
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	var (
		names   []string
		outputs int
	)
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if u := registry.UnboundedInputs(tool.InputSchema); len(u) != 0 {
			t.Errorf("%s: unbounded input: %s\nschema: %s", tool.Name, strings.Join(u, "; "), tool.InputSchema)
		}
		if err := registry.FastCheckable(tool.InputSchema); err != nil {
			t.Errorf("%s: input schema: %v", tool.Name, err)
		}
		if len(tool.OutputSchema) > 0 {
			outputs++
			if err := registry.FastCheckable(tool.OutputSchema); err != nil {
				t.Errorf("%s: output schema: %v", tool.Name, err)
			}
		}
	}
	// The check saw every plugin's capabilities, not an empty list.
	if outputs == 0 {
		t.Error("no tool in tools/list declares an output schema")
	}
	for _, want := range []string{"booking.create", "subscription.subscribe", platform.SearchName, "llm.ask", "hello.greet", "events.poll"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
}
