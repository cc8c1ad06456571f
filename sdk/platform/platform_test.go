package platform_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
	"github.com/capgate/capgate/sdk/sdktest"
)

// tagBound is the value of key in the capgate tag of field of T, or -1.
func tagBound[T any](t *testing.T, field, key string) int {
	t.Helper()
	f, ok := reflect.TypeFor[T]().FieldByName(field)
	if !ok {
		t.Fatalf("%T has no field %s", *new(T), field)
	}
	for _, kv := range strings.Split(f.Tag.Get(sdk.BoundsTag), ",") {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%T.%s: %s=%q", *new(T), field, key, v)
			}
			return n
		}
	}
	return -1
}

// TestTagsStateTheBounds holds the capgate tags, which agents read in the
// schemas and the host enforces, equal to the constants callers and the
// provider use.
func TestTagsStateTheBounds(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"SearchIn.Query maxLength", tagBound[platform.SearchIn](t, "Query", "maxLength"), platform.MaxQueryLen},
		{"SearchIn.Entity maxLength", tagBound[platform.SearchIn](t, "Entity", "maxLength"), platform.MaxEntityLen},
		{"SearchIn.Limit minimum", tagBound[platform.SearchIn](t, "Limit", "minimum"), 0},
		{"SearchIn.Limit maximum", tagBound[platform.SearchIn](t, "Limit", "maximum"), platform.MaxLimit},
		{"GetIn.Entity maxLength", tagBound[platform.GetIn](t, "Entity", "maxLength"), platform.MaxEntityLen},
		{"GetIn.ID maxLength", tagBound[platform.GetIn](t, "ID", "maxLength"), platform.MaxIDLen},
		{"ListIn.Entity maxLength", tagBound[platform.ListIn](t, "Entity", "maxLength"), platform.MaxEntityLen},
		{"ListIn.Cursor maxLength", tagBound[platform.ListIn](t, "Cursor", "maxLength"), platform.MaxCursorLen},
		{"ListIn.Limit minimum", tagBound[platform.ListIn](t, "Limit", "minimum"), 0},
		{"ListIn.Limit maximum", tagBound[platform.ListIn](t, "Limit", "maximum"), platform.MaxLimit},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d in the tag, %d as a constant", c.name, c.got, c.want)
		}
	}
	if want := base64.RawURLEncoding.EncodedLen(platform.MaxEntityLen + 1 + utf8.UTFMax*platform.MaxIDLen); platform.MaxCursorLen != want {
		t.Errorf("MaxCursorLen %d, want %d", platform.MaxCursorLen, want)
	}
	// The query's limits are told in words an agent can act on.
	f, _ := reflect.TypeFor[platform.SearchIn]().FieldByName("Query")
	for _, s := range []string{strconv.Itoa(platform.MaxQueryLen) + " characters", strconv.Itoa(platform.MaxQueryTerms) + " words"} {
		if !strings.Contains(f.Tag.Get("jsonschema"), s) {
			t.Errorf("the query's description does not say %q", s)
		}
	}
}

func TestRecordKeepsNumbers(t *testing.T) {
	var out platform.GetOut
	in := `{"entity":"e","id":"1","record":{"seats":12345678901234567890,"price":0.1000,"nested":{"n":[1e400]}}}`
	if err := json.Unmarshal([]byte(in), &out); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(out.Record)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"nested":{"n":[1e400]},"price":0.1000,"seats":12345678901234567890}`; string(b) != want {
		t.Errorf("record encodes as %s, want %s", b, want)
	}
	out = platform.GetOut{}
	if err := json.Unmarshal([]byte(`{"record":null}`), &out); err != nil || out.Record != nil {
		t.Errorf("null record: %v %v", out.Record, err)
	}
	for _, bad := range []string{`{"record":[1]}`, `{"record":"x"}`, `{"record":7}`} {
		if err := json.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

// invoker records one call and answers it.
type invoker struct {
	capability string
	args       any
	res        json.RawMessage
	err        error
}

func (i *invoker) Invoke(_ context.Context, capability string, args any) (json.RawMessage, error) {
	i.capability, i.args = capability, args
	return i.res, i.err
}

func TestHelpers(t *testing.T) {
	ctx := context.Background()
	iv := &invoker{res: json.RawMessage(`{"hits":[{"entity":"e","id":"1","title":"T","snippet":"s","score":2}]}`)}
	res, err := platform.Search(ctx, iv, platform.SearchIn{Query: "q", Limit: 3})
	if err != nil || iv.capability != platform.SearchName || iv.args != (platform.SearchIn{Query: "q", Limit: 3}) ||
		len(res.Hits) != 1 || res.Hits[0] != (platform.Hit{Entity: "e", ID: "1", Title: "T", Snippet: "s", Score: 2}) {
		t.Errorf("Search: %+v %v, sent %s %+v", res, err, iv.capability, iv.args)
	}
	iv.res = json.RawMessage(`{"entity":"e","id":"1","record":{"n":1}}`)
	got, err := platform.Get(ctx, iv, platform.GetIn{Entity: "e", ID: "1"})
	if err != nil || iv.capability != platform.GetName || got.Record["n"] != json.Number("1") {
		t.Errorf("Get: %+v %v, sent %s", got, err, iv.capability)
	}
	iv.res = json.RawMessage(`{"items":[{"entity":"e","id":"1","title":"T"}],"next_cursor":"c"}`)
	page, err := platform.List(ctx, iv, platform.ListIn{Cursor: "b"})
	if err != nil || iv.capability != platform.ListName || len(page.Items) != 1 || page.NextCursor != "c" {
		t.Errorf("List: %+v %v, sent %s", page, err, iv.capability)
	}

	// The caller's errors pass unchanged, so the SDK's checks apply.
	refused := &sdk.RefusedError{Capability: platform.GetName, Step: sdk.StepPermission, Reason: "no"}
	iv.err = refused
	if _, err := platform.Get(ctx, iv, platform.GetIn{}); err != refused {
		t.Errorf("a refusal came back as %v", err)
	}
	iv.err = nil
	iv.res = json.RawMessage(`{"hits":"many"}`)
	if _, err := platform.Search(ctx, iv, platform.SearchIn{}); err == nil || !strings.Contains(err.Error(), "platform.search: decode result") {
		t.Errorf("a malformed result: %v", err)
	}
}

// TestThroughTheGate declares the capabilities with these types, as the
// provider does, and calls them from another plugin with the helpers: the
// schemas the SDK infers hold the bounds, and the gate applies them to
// nested calls.
func TestThroughTheGate(t *testing.T) {
	provider := sdk.New("catalogue", "test")
	sdk.Add(provider, sdk.Tool[platform.SearchIn, platform.SearchOut]{
		Name: platform.SearchName, Kind: sdk.Read, Permission: "catalogue.read",
		Handler: func(_ context.Context, _ sdk.Call, in platform.SearchIn) (platform.SearchOut, error) {
			return platform.SearchOut{Hits: []platform.Hit{{Entity: "room", ID: "a", Title: in.Query}}}, nil
		},
	})
	sdk.Add(provider, sdk.Tool[platform.GetIn, platform.GetOut]{
		Name: platform.GetName, Kind: sdk.Read, Permission: "catalogue.read",
		Handler: func(_ context.Context, _ sdk.Call, in platform.GetIn) (platform.GetOut, error) {
			if in.ID != "a" {
				return platform.GetOut{}, sdk.NotFound("no %s %q", in.Entity, in.ID)
			}
			return platform.GetOut{Entity: in.Entity, ID: in.ID, Record: platform.Record{"seats": json.Number("12345678901234567890")}}, nil
		},
	})
	sdk.Add(provider, sdk.Tool[platform.ListIn, platform.ListOut]{
		Name: platform.ListName, Kind: sdk.Read, Permission: "catalogue.read",
		Handler: func(context.Context, sdk.Call, platform.ListIn) (platform.ListOut, error) {
			return platform.ListOut{}, nil
		},
	})

	type askIn struct {
		Query string `json:"query" capgate:"maxLength=2000"`
		ID    string `json:"id" capgate:"maxLength=300"`
	}
	type askOut struct {
		Title   string   `json:"title"`
		Seats   string   `json:"seats"`
		Items   int      `json:"items"`
		Failure []string `json:"failure"`
	}
	caller := sdk.New("caller", "test")
	sdk.Add(caller, sdk.Tool[askIn, askOut]{
		Name: "caller.ask", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, in askIn) (askOut, error) {
			var out askOut
			res, err := platform.Search(ctx, call, platform.SearchIn{Query: in.Query})
			if err != nil {
				out.Failure = append(out.Failure, "search: "+err.Error())
			} else {
				out.Title = res.Hits[0].Title
			}
			rec, err := platform.Get(ctx, call, platform.GetIn{Entity: "room", ID: in.ID})
			switch {
			case sdk.IsNotFound(err):
				out.Failure = append(out.Failure, "get: not found")
			case err != nil:
				out.Failure = append(out.Failure, "get: "+err.Error())
			default:
				b, _ := json.Marshal(rec.Record["seats"])
				out.Seats = string(b)
			}
			page, err := platform.List(ctx, call, platform.ListIn{})
			if err != nil {
				return out, err
			}
			out.Items = len(page.Items)
			return out, nil
		},
	})
	h := sdktest.NewHost(t)
	for _, p := range []*sdk.Plugin{provider, caller} {
		if _, err := h.Add(p, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	c, err := h.Add(sdk.New("empty", "test"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	pr := sdk.Principal{Role: "reader", Scope: sdk.ScopeRead}

	out := sdktest.Call[askOut](t, c, "caller.ask", pr, askIn{Query: "quiet", ID: "a"})
	if out.Title != "quiet" || out.Seats != "12345678901234567890" || out.Items != 0 || len(out.Failure) != 0 {
		t.Errorf("answer %+v", out)
	}
	out = sdktest.Call[askOut](t, c, "caller.ask", pr, askIn{Query: "quiet", ID: "b"})
	if len(out.Failure) != 1 || out.Failure[0] != "get: not found" {
		t.Errorf("answer %+v, want get's NotFound", out)
	}
	// The schemas carry the bounds: a query over MaxQueryLen is refused
	// before the provider runs, and the caller learns it as the gate's
	// InvalidInput.
	out = sdktest.Call[askOut](t, c, "caller.ask", pr, askIn{Query: strings.Repeat("q", platform.MaxQueryLen+1), ID: "a"})
	if len(out.Failure) != 1 || !strings.Contains(out.Failure[0], "invalid arguments for platform.search") {
		t.Errorf("answer %+v, want the gate's refusal of the long query", out)
	}
	var se *sdk.Error
	_, err = c.Invoke(context.Background(), platform.GetName, pr, platform.GetIn{Entity: "room", ID: strings.Repeat("i", platform.MaxIDLen+1)})
	if !errors.As(err, &se) || se.Code != sdk.CodeInvalidInput {
		t.Errorf("an id over MaxIDLen: %v", err)
	}
}
