package sdktest_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

func roomsPlugin() *sdk.Plugin {
	p := sdk.New("rooms", "1")
	sdk.AddResource(p, sdk.Resource{URI: "rooms://terms", Name: "terms", MIMEType: "text/plain", Permission: "rooms.read",
		Read: func(_ context.Context, call sdk.Call) (sdk.ResourceContents, error) {
			return sdk.ResourceContents{Text: "rules for " + call.Principal.UserID}, nil
		}})
	sdk.AddResourceTemplate(p, sdk.ResourceTemplate{URITemplate: "rooms://plans/{room}", Name: "plan", MIMEType: "image/png", Permission: "rooms.read",
		Read: func(_ context.Context, _ sdk.Call, _ string, vars map[string]string) (sdk.ResourceContents, error) {
			if vars["room"] == "nowhere" {
				return sdk.ResourceContents{}, sdk.NotFound("no room")
			}
			return sdk.ResourceContents{Blob: []byte(vars["room"])}, nil
		}})
	return p
}

// TestResourceRoundTrip: a plugin's resources are read through the gate,
// and what a caller may not read is not found, like what does not exist.
func TestResourceRoundTrip(t *testing.T) {
	ctx := context.Background()
	h := sdktest.NewHost(t)
	h.Roles = map[string][]string{"reader": {"rooms.read"}, "nobody": nil}
	c, err := h.Add(roomsPlugin(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	alice := sdk.Principal{Role: "reader", Scope: sdk.ScopeRead, UserID: "alice"}
	got, err := c.ReadResource(ctx, "rooms://terms", alice)
	if err != nil || len(got) != 1 || got[0].Text != "rules for alice" || got[0].MIMEType != "text/plain" || got[0].URI != "rooms://terms" {
		t.Fatalf("terms: %+v, %v", got, err)
	}
	got, err = c.ReadResource(ctx, "rooms://plans/a%2Fb", alice)
	if err != nil || !got[0].Binary || !bytes.Equal(got[0].Blob, []byte("a/b")) || got[0].MIMEType != "image/png" {
		t.Fatalf("plan: %+v, %v", got, err)
	}
	nobody := sdk.Principal{Role: "nobody", Scope: sdk.ScopeRead}
	for _, tc := range []struct {
		uri string
		pr  sdk.Principal
	}{{"rooms://terms", nobody}, {"rooms://plans/nowhere", alice}, {"rooms://other", alice}} {
		if _, err := c.ReadResource(ctx, tc.uri, tc.pr); !errors.Is(err, sdktest.ErrResourceNotFound) {
			t.Errorf("%s as %s: %v, want not found", tc.uri, tc.pr.Role, err)
		}
	}
}

// TestResourcesRefusedAtStart: an invalid declaration fails Start, every
// one named.
func TestResourcesRefusedAtStart(t *testing.T) {
	p := sdk.New("bad", "1")
	read := func(context.Context, sdk.Call) (sdk.ResourceContents, error) { return sdk.ResourceContents{}, nil }
	sdk.AddResource(p, sdk.Resource{URI: "capgate://x/1", Name: "x", Read: read})
	sdk.AddResource(p, sdk.Resource{URI: "no scheme", Name: "y", Read: read})
	h := sdktest.NewHost(t)
	if _, err := h.Add(p, nil, ""); err != nil {
		t.Fatal(err)
	}
	err := h.Start(context.Background(), false)
	if err == nil || !strings.Contains(err.Error(), `"capgate://x/1"`) || !strings.Contains(err.Error(), `"no scheme"`) {
		t.Fatalf("Start = %v", err)
	}
}

func TestInvokeContent(t *testing.T) {
	ctx := context.Background()
	p := sdk.New("plans", "1")
	sdk.Add(p, sdk.Tool[struct{}, sdk.Rich[int]]{Name: "plans.show", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, struct{}) (sdk.Rich[int], error) {
			return sdk.Rich[int]{Value: 2, Content: []sdk.Content{
				sdk.Text("two"), sdk.Image([]byte{1}, "image/png"),
				sdk.ResourceLink{URI: "plans://1", Name: "one", Title: "One"}, sdk.EmbeddedBlob("plans://2", "image/png", []byte{2}),
			}}, nil
		}})
	c := sdktest.Start(t, p, nil)
	res, blocks, err := c.InvokeContent(ctx, "plans.show", sdk.Principal{Role: "r", Scope: sdk.ScopeRead}, nil)
	if err != nil || string(res) != "2" || len(blocks) != 4 {
		t.Fatalf("%s %+v %v", res, blocks, err)
	}
	if blocks[0].Type != "text" || blocks[0].Text != "two" || blocks[1].Type != "image" || !bytes.Equal(blocks[1].Data, []byte{1}) ||
		blocks[2].Type != "resource_link" || blocks[2].Title != "One" || blocks[3].Type != "resource" || !bytes.Equal(blocks[3].Data, []byte{2}) {
		t.Errorf("blocks %+v", blocks)
	}
}
