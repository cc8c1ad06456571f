package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
)

// wired serves p over a real gRPC connection, configured with the host's
// max_result_bytes limit, and returns the host's ends: the call stream and
// the unary client.
func wired(t *testing.T, p *sdk.Plugin, limit uint64) (*pluginwire.CallStream, capgatev1.PluginServiceClient) {
	t.Helper()
	srv := sdkserver.NewServer(p)
	conn, _ := plugin.TestPluginGRPCConn(t, false, pluginwire.PluginSet(srv))
	raw, err := conn.Dispense(capgatev1.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	wc := raw.(*pluginwire.Client)
	ctx := context.Background()
	if _, err := wc.Configure(ctx, &capgatev1.ConfigureRequest{ConfigJson: []byte("{}"), DataDir: t.TempDir(), MaxResultBytes: limit}); err != nil {
		t.Fatal(err)
	}
	calls, err := pluginwire.OpenCalls(ctx, wc.PluginServiceClient)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		calls.Close()
		_ = conn.Close()
		_ = srv.Close()
	})
	return calls, wc.PluginServiceClient
}

type NoIn struct{}

type Booking struct {
	ID    string   `json:"id"`
	Rooms []string `json:"rooms"`
}

var png = []byte("\x89PNG\r\n\x1a\nfake")

func richPlugin() *sdk.Plugin {
	p := sdk.New("rich", "1.0.0")
	sdk.Add(p, sdk.Tool[NoIn, sdk.Contents]{Name: "rich.blocks", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, NoIn) (sdk.Contents, error) {
			return sdk.Contents{
				sdk.Text("hello"),
				sdk.Image(png, "image/png"),
				sdk.Audio([]byte("RIFF"), "audio/wav"),
				sdk.ResourceLink{URI: "docs://terms", Name: "terms", Title: "Terms", Description: "the terms", MIMEType: "text/plain", Size: 12},
				sdk.ResourceLink{URI: "docs://plan", Name: "plan"},
				sdk.EmbeddedText("docs://a", "text/plain", "embedded"),
				sdk.EmbeddedBlob("docs://b", "application/octet-stream", []byte{0, 1, 2}),
			}, nil
		}})
	sdk.Add(p, sdk.Tool[NoIn, sdk.Rich[Booking]]{Name: "rich.both", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, NoIn) (sdk.Rich[Booking], error) {
			// A nil slice in the value is still [] on the wire.
			return sdk.Rich[Booking]{Content: []sdk.Content{sdk.Text("booked")}, Value: Booking{ID: "b-1"}}, nil
		}})
	sdk.Add(p, sdk.Tool[NoIn, sdk.Contents]{Name: "rich.big", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, NoIn) (sdk.Contents, error) {
			return sdk.Contents{sdk.Image(make([]byte, 2000), "image/png")}, nil
		}})
	for name, bad := range map[string]sdk.Content{
		"rich.nomime": sdk.Image(png, ""), "rich.nolink": sdk.ResourceLink{URI: "docs://x"},
		"rich.nouri": sdk.EmbeddedText("", "text/plain", "x"), "rich.badtext": sdk.Text("\xff"), "rich.nil": nil,
	} {
		sdk.Add(p, sdk.Tool[NoIn, sdk.Contents]{Name: name, Kind: sdk.Read,
			Handler: func(context.Context, sdk.Call, NoIn) (sdk.Contents, error) { return sdk.Contents{bad}, nil }})
	}
	return p
}

func call(name string) dispatch.Request {
	return dispatch.Request{Capability: name, Args: json.RawMessage(`{}`), Principal: dispatch.Principal{Role: "r", Scope: dispatch.ScopeRead}}
}

func TestContentRoundTrip(t *testing.T) {
	p := richPlugin()
	calls, client := wired(t, p, 4<<20)
	desc, err := client.Describe(context.Background(), &capgatev1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range desc.Capabilities {
		switch c.Name {
		case "rich.blocks":
			if len(c.OutputSchema) != 0 {
				t.Errorf("content alone declares no output schema: %s", c.OutputSchema)
			}
		case "rich.both":
			if !strings.Contains(string(c.OutputSchema), `"rooms"`) || strings.Contains(string(c.OutputSchema), "Content") {
				t.Errorf("Rich[Booking] declares Booking's schema: %s", c.OutputSchema)
			}
		}
	}

	var rep dispatch.ContentReport
	res, err := calls.Invoke(dispatch.WithContentReport(context.Background(), &rep), "c1", call("rich.blocks"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res) != "null" {
		t.Errorf("result %s, want null", res)
	}
	want := []dispatch.Content{
		{Type: dispatch.ContentText, Text: "hello"},
		{Type: dispatch.ContentImage, Data: png, MIMEType: "image/png"},
		{Type: dispatch.ContentAudio, Data: []byte("RIFF"), MIMEType: "audio/wav"},
		{Type: dispatch.ContentResourceLink, Link: dispatch.ResourceLink{URI: "docs://terms", Name: "terms", Title: "Terms", Description: "the terms", MIMEType: "text/plain", Size: 12, HasSize: true}},
		{Type: dispatch.ContentResourceLink, Link: dispatch.ResourceLink{URI: "docs://plan", Name: "plan"}},
		{Type: dispatch.ContentResource, Resource: dispatch.ResourceContents{URI: "docs://a", MIMEType: "text/plain", Text: "embedded"}},
		{Type: dispatch.ContentResource, Resource: dispatch.ResourceContents{URI: "docs://b", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2}, Binary: true}},
	}
	if len(rep.Blocks) != len(want) {
		t.Fatalf("%d blocks, want %d: %+v", len(rep.Blocks), len(want), rep.Blocks)
	}
	for i := range want {
		g, w := rep.Blocks[i], want[i]
		if g.Type != w.Type || g.Text != w.Text || !bytes.Equal(g.Data, w.Data) || g.MIMEType != w.MIMEType || g.Link != w.Link ||
			g.Resource.URI != w.Resource.URI || g.Resource.Text != w.Resource.Text || !bytes.Equal(g.Resource.Blob, w.Resource.Blob) ||
			g.Resource.Binary != w.Resource.Binary || g.Resource.MIMEType != w.Resource.MIMEType {
			t.Errorf("block %d = %+v, want %+v", i, g, w)
		}
	}
	if rep.Bytes <= len(png) {
		t.Errorf("blocks counted as %d bytes", rep.Bytes)
	}

	rep = dispatch.ContentReport{}
	res, err = calls.Invoke(dispatch.WithContentReport(context.Background(), &rep), "c2", call("rich.both"))
	if err != nil || string(res) != `{"id":"b-1","rooms":[]}` || len(rep.Blocks) != 1 || rep.Blocks[0].Text != "booked" {
		t.Fatalf("both = %s, %+v, %v", res, rep.Blocks, err)
	}
	// Without a report the structured result comes alone, as a nested
	// call or another protocol asks.
	if res, err := calls.Invoke(context.Background(), "c3", call("rich.both")); err != nil || string(res) != `{"id":"b-1","rooms":[]}` {
		t.Fatalf("no report: %s, %v", res, err)
	}
}

func TestContentRefused(t *testing.T) {
	p := richPlugin()
	calls, _ := wired(t, p, 4<<20)
	for _, name := range []string{"rich.nomime", "rich.nolink", "rich.nouri", "rich.badtext", "rich.nil"} {
		var rep dispatch.ContentReport
		_, err := calls.Invoke(dispatch.WithContentReport(context.Background(), &rep), name, call(name))
		var te *dispatch.ToolError
		if err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), "content block 0") || len(rep.Blocks) != 0 {
			t.Errorf("%s: %v (blocks %d), want an internal failure naming the block", name, err, len(rep.Blocks))
		}
	}
}

func TestContentBounded(t *testing.T) {
	calls, _ := wired(t, richPlugin(), 1000)
	_, err := calls.Invoke(context.Background(), "c1", call("rich.big"))
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.InvalidInput || !strings.Contains(te.Message, "more than this server's limit of 1000 bytes") {
		t.Fatalf("err = %v, want the result refused as over the limit", err)
	}
}

func TestContentHostChecks(t *testing.T) {
	// What a plugin built without the SDK might send is checked by the
	// host as the SDK checks it.
	for _, c := range []*capgatev1.Content{
		{},
		{Block: &capgatev1.Content_Audio{Audio: &capgatev1.MediaContent{Data: []byte{1}}}},
		{Block: &capgatev1.Content_ResourceLink{ResourceLink: &capgatev1.ResourceLink{Name: "n"}}},
		{Block: &capgatev1.Content_ResourceLink{ResourceLink: &capgatev1.ResourceLink{Uri: "x://\xff", Name: "n"}}},
		{Block: &capgatev1.Content_Resource{Resource: &capgatev1.ResourceContents{Uri: "x://a"}}},
		{Block: &capgatev1.Content_Resource{Resource: &capgatev1.ResourceContents{Uri: "x://a", Body: &capgatev1.ResourceContents_Text{Text: "\xff"}}}},
	} {
		if _, _, err := pluginwire.Contents([]*capgatev1.Content{c}); err == nil {
			t.Errorf("%v passed", c)
		}
	}
}

func TestResourcesServed(t *testing.T) {
	p := sdk.New("docs", "1.0.0")
	sdk.AddResource(p, sdk.Resource{URI: "docs://terms", Name: "terms", Title: "Terms", MIMEType: "text/plain", Size: 5, Permission: "docs.read",
		Read: func(_ context.Context, call sdk.Call) (sdk.ResourceContents, error) {
			return sdk.ResourceContents{Text: "terms for " + call.Principal.Role}, nil
		}})
	sdk.AddResource(p, sdk.Resource{URI: "docs://logo", Name: "logo", MIMEType: "image/png",
		Read: func(context.Context, sdk.Call) (sdk.ResourceContents, error) {
			return sdk.ResourceContents{Blob: png}, nil
		}})
	sdk.AddResource(p, sdk.Resource{URI: "docs://both", Name: "both",
		Read: func(context.Context, sdk.Call) (sdk.ResourceContents, error) {
			return sdk.ResourceContents{Text: "x", Blob: png}, nil
		}})
	sdk.AddResource(p, sdk.Resource{URI: "docs://huge", Name: "huge",
		Read: func(context.Context, sdk.Call) (sdk.ResourceContents, error) {
			return sdk.ResourceContents{Text: strings.Repeat("x", 2000)}, nil
		}})
	sdk.AddResourceTemplate(p, sdk.ResourceTemplate{URITemplate: "docs://items/{id}", Name: "item", MIMEType: "application/json", Pack: "items",
		Read: func(_ context.Context, _ sdk.Call, uri string, vars map[string]string) (sdk.ResourceContents, error) {
			if vars["id"] == "missing" {
				return sdk.ResourceContents{}, sdk.NotFound("no item %s", vars["id"])
			}
			return sdk.ResourceContents{Text: `{"id":"` + vars["id"] + `","uri":"` + uri + `"}`}, nil
		}})
	_, client := wired(t, p, 1000)
	ctx := context.Background()
	desc, err := client.Describe(ctx, &capgatev1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Resources) != 4 || desc.Resources[0].Uri != "docs://terms" || desc.Resources[0].GetSize() != 5 ||
		desc.Resources[0].Pack != "docs" || desc.Resources[0].Permission != "docs.read" || desc.Resources[1].Size != nil {
		t.Errorf("resources %v", desc.Resources)
	}
	if len(desc.ResourceTemplates) != 1 || desc.ResourceTemplates[0].Pack != "items" || desc.ResourceTemplates[0].MimeType != "application/json" {
		t.Errorf("templates %v", desc.ResourceTemplates)
	}
	principal := &capgatev1.Principal{Role: "reader", Scope: "read"}
	read := func(uri, tmpl string, vars map[string]string) (*capgatev1.ReadResourceResponse, error) {
		return client.ReadResource(ctx, &capgatev1.ReadResourceRequest{Principal: principal, Uri: uri, UriTemplate: tmpl, Variables: vars})
	}
	resp, err := read("docs://terms", "", nil)
	if err != nil || len(resp.Contents) != 1 || resp.Contents[0].GetText() != "terms for reader" || resp.Contents[0].MimeType != "text/plain" || resp.Contents[0].Uri != "docs://terms" {
		t.Fatalf("terms: %v, %v", resp, err)
	}
	resp, err = read("docs://logo", "", nil)
	if err != nil || !bytes.Equal(resp.Contents[0].GetBlob(), png) || resp.Contents[0].MimeType != "image/png" {
		t.Fatalf("logo: %v, %v", resp, err)
	}
	resp, err = read("docs://items/7", "docs://items/{id}", map[string]string{"id": "7"})
	if err != nil || resp.Contents[0].GetText() != `{"id":"7","uri":"docs://items/7"}` || resp.Contents[0].MimeType != "application/json" {
		t.Fatalf("item: %v, %v", resp, err)
	}
	resp, err = read("docs://items/missing", "docs://items/{id}", map[string]string{"id": "missing"})
	if err != nil || resp.Error.GetCode() != capgatev1.ToolError_CODE_NOT_FOUND {
		t.Fatalf("missing: %v, %v", resp, err)
	}
	resp, err = read("docs://huge", "", nil)
	if err != nil || resp.Error.GetCode() != capgatev1.ToolError_CODE_INVALID_INPUT || !strings.Contains(resp.Error.GetMessage(), "limit of 1000 bytes") {
		t.Fatalf("huge: %v, %v", resp, err)
	}
	if _, err := read("docs://both", "", nil); err == nil {
		t.Error("text and blob together passed")
	}
	if _, err := read("docs://unknown", "", nil); err == nil {
		t.Error("an undeclared resource was read")
	}
	if _, err := read("docs://items/1", "docs://other/{id}", nil); err == nil {
		t.Error("an undeclared template was read")
	}
}

func TestAddResourcePanics(t *testing.T) {
	read := func(context.Context, sdk.Call) (sdk.ResourceContents, error) { return sdk.ResourceContents{}, nil }
	tread := func(context.Context, sdk.Call, string, map[string]string) (sdk.ResourceContents, error) {
		return sdk.ResourceContents{}, nil
	}
	for name, f := range map[string]func(p *sdk.Plugin){
		"no read": func(p *sdk.Plugin) { sdk.AddResource(p, sdk.Resource{URI: "a://b", Name: "n"}) },
		"no name": func(p *sdk.Plugin) { sdk.AddResource(p, sdk.Resource{URI: "a://b", Read: read}) },
		"twice":   func(p *sdk.Plugin) { sdk.AddResource(p, sdk.Resource{URI: "a://b", Name: "n", Read: read}) },
		"template read": func(p *sdk.Plugin) {
			sdk.AddResourceTemplate(p, sdk.ResourceTemplate{URITemplate: "a://{x}", Name: "n"})
		},
		"template twice": func(p *sdk.Plugin) {
			sdk.AddResourceTemplate(p, sdk.ResourceTemplate{URITemplate: "a://{y}", Name: "n", Read: tread})
		},
	} {
		p := sdk.New("docs", "1")
		sdk.AddResource(p, sdk.Resource{URI: "a://b", Name: "n", Read: read})
		sdk.AddResourceTemplate(p, sdk.ResourceTemplate{URITemplate: "a://{y}", Name: "n", Read: tread})
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(p)
		}()
	}
}

type Item struct {
	ID string `json:"id"`
}

// A structured result may be any JSON value, alone or beside blocks.
func TestResultOfAnyType(t *testing.T) {
	p := sdk.New("any", "1.0.0")
	sdk.Add(p, sdk.Tool[NoIn, []Item]{Name: "any.list", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, NoIn) ([]Item, error) { return nil, nil }})
	sdk.Add(p, sdk.Tool[NoIn, sdk.Rich[string]]{Name: "any.text", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, NoIn) (sdk.Rich[string], error) {
			return sdk.Rich[string]{Value: "done", Content: []sdk.Content{sdk.Text("done, in words")}}, nil
		}})
	calls, client := wired(t, p, 4<<20)
	desc, err := client.Describe(context.Background(), &capgatev1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]string{}
	for _, c := range desc.Capabilities {
		schemas[c.Name] = string(c.OutputSchema)
	}
	if !strings.Contains(schemas["any.list"], `"type":"array"`) || !strings.Contains(schemas["any.text"], `"type":"string"`) {
		t.Errorf("schemas %v", schemas)
	}
	// A nil slice is [] on the wire, never null.
	if res, err := calls.Invoke(context.Background(), "c1", call("any.list")); err != nil || string(res) != `[]` {
		t.Errorf("list = %s, %v", res, err)
	}
	var rep dispatch.ContentReport
	if res, err := calls.Invoke(dispatch.WithContentReport(context.Background(), &rep), "c2", call("any.text")); err != nil || string(res) != `"done"` || len(rep.Blocks) != 1 {
		t.Errorf("text = %s, %+v, %v", res, rep.Blocks, err)
	}
}
