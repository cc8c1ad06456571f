package main

import (
	"context"
	"encoding/json"
	"testing"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

func TestGreet(t *testing.T) {
	c := sdktest.Start(t, newPlugin(), nil)
	for _, name := range []string{"bench", "", "Ada Lovelace"} {
		got := sdktest.Call[GreetOut](t, c, "hello.greet", sdk.Principal{Role: "customer", Scope: "read"}, GreetIn{Name: name})
		if want := "hello, " + name; got.Greeting != want {
			t.Errorf("greet %q = %q, want %q", name, got.Greeting, want)
		}
	}
}

func TestDescribe(t *testing.T) {
	c := sdktest.Start(t, newPlugin(), nil)
	d, err := c.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	caps := d.GetCapabilities()
	if len(caps) != 1 {
		t.Fatalf("capabilities = %d, want 1", len(caps))
	}
	cp := caps[0]
	if cp.GetName() != "hello.greet" || cp.GetPack() != "hello" || cp.GetPermission() != "hello.greet" || cp.GetKind() != capgatev1.Kind_KIND_READ {
		t.Errorf("capability = %v", cp)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(cp.GetInputSchema(), &schema); err != nil {
		t.Fatalf("input schema: %v", err)
	}
	if len(schema.Required) != 1 || schema.Required[0] != "name" {
		t.Errorf("input schema requires %v, want [name]", schema.Required)
	}
}
