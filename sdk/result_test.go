package sdk_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type Inner struct {
	Tags []string `json:"tags"`
}

type Embedded struct {
	Notes []string `json:"notes"`
}

type shelfOut struct {
	Embedded
	Items   []string          `json:"items"`
	Labels  map[string]string `json:"labels"`
	Inner   Inner             `json:"inner"`
	Ptr     *Inner            `json:"ptr"`
	Nested  []Inner           `json:"nested"`
	Maybe   *[]string         `json:"maybe"`
	Raw     []byte            `json:"raw"`
	skipped []string
}

type emptyIn struct{}

// TestEmptySlicesAreArrays: nil slices and maps in a result reach the
// agent as [] and {}, slice schemas say "array" (a pointer to one may still
// be null), the result passes the output schema the host checks, and the
// handler's own values are not written to.
func TestEmptySlicesAreArrays(t *testing.T) {
	shared := &Inner{}
	nested := []Inner{{}}
	p := sdk.New("shelf", "1")
	sdk.Add(p, sdk.Tool[emptyIn, shelfOut]{Name: "shelf.show", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, emptyIn) (shelfOut, error) {
			return shelfOut{Ptr: shared, Nested: nested}, nil
		}})
	c := sdktest.Start(t, p, nil)
	out, err := c.Invoke(context.Background(), "shelf.show", sdk.Principal{Role: "r", Scope: sdk.ScopeRead}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"notes":[],"items":[],"labels":{},"inner":{"tags":[]},"ptr":{"tags":[]},"nested":[{"tags":[]}],"maybe":null,"raw":null}`
	if string(out) != want {
		t.Errorf("result\n %s\nwant\n %s", out, want)
	}
	if shared.Tags != nil || nested[0].Tags != nil {
		t.Error("encoding the result wrote to the handler's values")
	}

	d, err := c.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Type  any `json:"type"`
			Items *struct {
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(d.Capabilities[0].OutputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"items", "notes", "nested"} {
		if typ := schema.Properties[name].Type; typ != "array" {
			t.Errorf("%s: schema type %v; want \"array\"", name, typ)
		}
	}
	if typ := schema.Properties["nested"].Items.Properties["tags"].Type; typ != "array" {
		t.Errorf("nested[].tags: schema type %v; want \"array\"", typ)
	}
	if typ, _ := json.Marshal(schema.Properties["maybe"].Type); string(typ) != `["null","array"]` {
		t.Errorf("maybe (a pointer): schema type %s; want null or array", typ)
	}
}
