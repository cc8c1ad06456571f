package sdk_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/sdk"
)

// counter is a service a plugin would build in OnConfigure.
type counter struct{ base int }

type addIn struct {
	N int `json:"n"`
}

type addOut struct {
	Sum int `json:"sum"`
}

func (c *counter) Add(_ context.Context, _ sdk.Call, in addIn) (addOut, error) {
	return addOut{Sum: c.base + in.N}, nil
}

func (c *counter) Owner(_ context.Context, in addIn) (string, error) {
	if in.N < 0 {
		return "", sdk.NotFound("no item %d", in.N)
	}
	return "user-1", nil
}

func (c *counter) Page(_ context.Context, after string, limit int) ([]sdk.Document, error) {
	return []sdk.Document{{ID: after + "x", Title: strings.Repeat("t", limit)}}, nil
}

func TestConfigured(t *testing.T) {
	ctx := context.Background()
	// calls runs every kind of adapter on svc and reports each result.
	calls := func(svc *sdk.Configured[counter]) map[string]func() (string, error) {
		handler := sdk.Handler(svc, (*counter).Add)
		owner := sdk.Bind(svc, (*counter).Owner)
		list := sdk.Bind2(svc, (*counter).Page)
		return map[string]func() (string, error){
			"Handler": func() (string, error) {
				out, err := handler(ctx, sdk.Call{}, addIn{N: 2})
				return strings.Repeat("+", out.Sum), err
			},
			"Bind": func() (string, error) { return owner(ctx, addIn{N: 1}) },
			"Bind2": func() (string, error) {
				docs, err := list(ctx, "a", 2)
				if len(docs) == 0 {
					return "", err
				}
				return docs[0].ID + docs[0].Title, err
			},
			"Get": func() (string, error) {
				c, err := svc.Get()
				if c == nil {
					return "", err
				}
				return "got", err
			},
		}
	}
	tests := []struct {
		name    string
		plugin  string
		set     bool // call Set(with)
		with    *counter
		want    map[string]string // adapter → result; nil means every call fails
		wantErr string
	}{
		{name: "before Set names the plugin", plugin: "shop", wantErr: "shop plugin is not configured"},
		{name: "zero value before Set", wantErr: "plugin is not configured"},
		{name: "Set nil is not configured", plugin: "shop", set: true, wantErr: "shop plugin is not configured"},
		{
			name: "after Set runs the method", plugin: "shop", set: true, with: &counter{base: 1},
			want: map[string]string{"Handler": "+++", "Bind": "user-1", "Bind2": "axtt", "Get": "got"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &sdk.Configured[counter]{Plugin: tt.plugin}
			if tt.set {
				svc.Set(tt.with)
			}
			for name, call := range calls(svc) {
				got, err := call()
				if tt.want == nil {
					if err == nil || err.Error() != tt.wantErr {
						t.Errorf("%s: error %v, want %q", name, err, tt.wantErr)
					}
					if got != "" {
						t.Errorf("%s: result %q with the error, want the zero value", name, got)
					}
					continue
				}
				if err != nil || got != tt.want[name] {
					t.Errorf("%s = %q, %v; want %q, nil", name, got, err, tt.want[name])
				}
			}
		})
	}
}

// The method's own error reaches the caller unchanged.
func TestConfiguredMethodError(t *testing.T) {
	svc := &sdk.Configured[counter]{Plugin: "shop"}
	svc.Set(&counter{})
	_, err := sdk.Bind(svc, (*counter).Owner)(context.Background(), addIn{N: -1})
	if !sdk.IsNotFound(err) {
		t.Fatalf("error %v, want the method's NotFound", err)
	}
}

// Set and Get from many goroutines at once (run with -race): every Get
// sees nothing or a complete service, never a torn one.
func TestConfiguredConcurrent(t *testing.T) {
	var svc sdk.Configured[counter]
	handler := sdk.Handler(&svc, (*counter).Add)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			svc.Set(&counter{base: i})
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				out, err := handler(context.Background(), sdk.Call{}, addIn{N: 100})
				if err == nil && (out.Sum < 100 || out.Sum > 107) {
					t.Errorf("sum %d from a torn service", out.Sum)
				}
			}
		}()
	}
	wg.Wait()
	if _, err := svc.Get(); err != nil {
		t.Fatalf("after Set: %v", err)
	}
}
