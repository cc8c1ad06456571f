// Command probe is a test plugin for the end-to-end tests: capabilities
// that hold a call, return a result of a chosen size, or take any JSON,
// so tests can load the host the way a slow, chatty or hostile plugin
// would, and one that answers content blocks, beside resources of its own
// (one that no demo role may read), and one that asks its caller's client
// mid-call. It is not built into the product.
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/capgate/capgate/sdk"
)

// Pack and Permission of every probe capability.
const (
	Pack       = "probe"
	Permission = "probe.run"
)

type slowIn struct {
	// MS is how long the call holds, unless cancelled first.
	MS int `json:"ms" capgate:"minimum=0,maximum=600000"`
	// Tag names the call in the plugin's log.
	Tag string `json:"tag,omitempty" capgate:"maxLength=64"`
}

type slowOut struct {
	Waited int `json:"waited_ms"`
}

type bigIn struct {
	Bytes int `json:"bytes" capgate:"minimum=0,maximum=67108864"`
}

type bigOut struct {
	Text string `json:"text"`
}

type echoIn struct {
	Value any `json:"value"`
}

type echoOut struct {
	PID int `json:"pid"`
}

type planIn struct {
	Room string `json:"room" capgate:"minLength=1,maxLength=64"`
}

// PNG is a 1x1 image, the floor plan of every room.
var PNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")

// Terms is the text of the probe://terms resource.
const Terms = "Leave the room as you found it."

func main() {
	p := sdk.New("probe", "1.0.0")
	sdk.Add(p, sdk.Tool[slowIn, slowOut]{
		Name: "probe.slow", Description: "Hold the call for ms milliseconds, or until it is cancelled.",
		Kind: sdk.Read, Pack: Pack, Permission: Permission,
		Handler: func(ctx context.Context, call sdk.Call, in slowIn) (slowOut, error) {
			start := time.Now()
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return slowOut{Waited: int(time.Since(start).Milliseconds())}, nil
			case <-ctx.Done():
				p.Logger().Info("slow call ended", "tag", in.Tag, "cause", ctx.Err().Error(),
					"after_ms", time.Since(start).Milliseconds())
				return slowOut{}, ctx.Err()
			}
		},
	})
	sdk.Add(p, sdk.Tool[bigIn, bigOut]{
		Name: "probe.big", Description: "Return a text of the given number of bytes.",
		Kind: sdk.Read, Pack: Pack, Permission: Permission,
		Handler: func(ctx context.Context, call sdk.Call, in bigIn) (bigOut, error) {
			return bigOut{Text: strings.Repeat("x", in.Bytes)}, nil
		},
	})
	sdk.Add(p, sdk.Tool[echoIn, echoOut]{
		Name: "probe.echo", Description: "Take any JSON value; answer the plugin's pid.",
		Kind: sdk.Read, Pack: Pack, Permission: Permission,
		Handler: func(ctx context.Context, call sdk.Call, in echoIn) (echoOut, error) {
			return echoOut{PID: os.Getpid()}, nil
		},
	})
	sdk.Add(p, sdk.Tool[planIn, sdk.Contents]{
		Name: "probe.plan", Description: "Show a room's floor plan, with a link to the house rules.",
		Kind: sdk.Read, Pack: Pack, Permission: Permission,
		Handler: func(ctx context.Context, call sdk.Call, in planIn) (sdk.Contents, error) {
			return sdk.Contents{
				sdk.Text("Floor plan of " + in.Room),
				sdk.Image(PNG, "image/png"),
				sdk.ResourceLink{URI: "probe://terms", Name: "terms", Title: "House rules", MIMEType: "text/plain"},
			}, nil
		},
	})
	sdk.AddResource(p, sdk.Resource{
		URI: "probe://terms", Name: "terms", Title: "House rules", MIMEType: "text/plain",
		Pack: Pack, Permission: Permission,
		Read: func(context.Context, sdk.Call) (sdk.ResourceContents, error) {
			return sdk.ResourceContents{Text: Terms}, nil
		},
	})
	sdk.AddResource(p, sdk.Resource{
		URI: "probe://secret", Name: "secret", Description: "Readable by no demo role.",
		Pack: Pack, Permission: "probe.secret",
		Read: func(context.Context, sdk.Call) (sdk.ResourceContents, error) {
			return sdk.ResourceContents{Text: "secret"}, nil
		},
	})
	sdk.AddResourceTemplate(p, sdk.ResourceTemplate{
		URITemplate: "probe://rooms/{room}/plan", Name: "plan", Title: "Floor plan", MIMEType: "image/png",
		Pack: Pack, Permission: Permission,
		Read: func(_ context.Context, _ sdk.Call, _ string, vars map[string]string) (sdk.ResourceContents, error) {
			if vars["room"] == "nowhere" {
				return sdk.ResourceContents{}, sdk.NotFound("no room %q", vars["room"])
			}
			return sdk.ResourceContents{Blob: PNG}, nil
		},
	})
	sdk.Add(p, sdk.Tool[askIn, askOut]{
		Name: "probe.ask", Description: "Ask the caller's user for a name, then, if the client samples, its model for a greeting.",
		Kind: sdk.Read, Pack: Pack, Permission: Permission,
		Handler: func(ctx context.Context, call sdk.Call, in askIn) (askOut, error) {
			ans, err := call.Elicit(ctx, "name", sdk.FormFor[nameForm]("What is your name?"))
			if err != nil {
				return askOut{}, err
			}
			var f nameForm
			if !ans.Accepted() || ans.Decode(&f) != nil {
				return askOut{Answer: ans.Action}, nil
			}
			out := askOut{Answer: ans.Action, Name: f.Name}
			s, err := call.Sample(ctx, "greeting", sdk.SamplingRequest{MaxTokens: 50,
				Messages: []sdk.SamplingMessage{{Role: "user", Text: "Greet " + f.Name}}})
			var cannot *sdk.CannotAskError
			switch {
			case errors.As(err, &cannot):
			case err != nil:
				return askOut{}, err
			default:
				out.Greeting = s.Text
			}
			return out, nil
		},
	})
	// The plan's room completes from the rooms with a plan.
	p.CompleteTemplate("probe://rooms/{room}/plan", "room", func(_ context.Context, _ sdk.Call, partial string, _ map[string]string) ([]string, error) {
		var out []string
		for _, r := range []string{"aurora", "borealis", "cirrus"} {
			if strings.HasPrefix(r, partial) {
				out = append(out, r)
			}
		}
		return out, nil
	})
	sdk.Serve(p)
}

type askIn struct{}

type nameForm struct {
	Name string `json:"name" jsonschema:"your name"`
}

type askOut struct {
	Answer   string `json:"answer"`
	Name     string `json:"name,omitempty"`
	Greeting string `json:"greeting,omitempty"`
}
