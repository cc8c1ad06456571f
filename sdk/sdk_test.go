package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type noteIn struct {
	ID string `json:"id"`
}

type noteOut struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	Text  string `json:"text,omitempty"`
}

type pluginConfig struct {
	Greeting string `json:"greeting"`
}

// newNotes builds a small plugin with an owner-guarded capability and a
// configuration step, exercising every part of the contract.
func newNotes(configured *pluginConfig) *sdk.Plugin {
	notes := map[string]noteOut{"n1": {ID: "n1", Owner: "alice", Text: "hi"}}
	p := sdk.New("notes", "0.1.0")
	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
		if err := env.DecodeConfig(configured); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(env.DataDir, "marker"), []byte("x"), 0o600)
	})
	sdk.Add(p, sdk.Tool[noteIn, noteOut]{
		Name: "notes.get", Description: "Read a note.", Kind: sdk.Read, Pack: "notes", Permission: "notes.read",
		Handler: func(ctx context.Context, call sdk.Call, in noteIn) (noteOut, error) {
			switch in.ID {
			case "boom":
				panic("handler bug")
			case "fail":
				return noteOut{}, errors.New("disk on fire")
			case "conflict":
				return noteOut{}, sdk.Conflict("note is locked")
			case "bad":
				return noteOut{}, sdk.InvalidInput("bad id")
			}
			n, ok := notes[in.ID]
			if !ok {
				return noteOut{}, sdk.NotFound("no note %q", in.ID)
			}
			n.Text += " " + call.Principal.UserID
			return n, nil
		},
		Owner: func(ctx context.Context, _ sdk.Call, in noteIn) (string, error) {
			switch in.ID {
			case "boom", "fail", "conflict", "bad": // alice's, failing in the handler
				return "alice", nil
			}
			n, ok := notes[in.ID]
			if !ok {
				return "", sdk.NotFound("no note %q", in.ID)
			}
			return n.Owner, nil
		},
	})
	sdk.Add(p, sdk.Tool[noteIn, noteOut]{
		Name: "notes.delete", Kind: sdk.Action, Pack: "notes", Permission: "notes.write", Destructive: true, Risk: sdk.Dangerous,
		Handler: func(ctx context.Context, call sdk.Call, in noteIn) (noteOut, error) { return noteOut{ID: in.ID}, nil },
	})
	return p
}

func TestDescribe(t *testing.T) {
	c := sdktest.Start(t, newNotes(&pluginConfig{}), nil)
	d, err := c.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "notes" || d.Version != "0.1.0" || len(d.Capabilities) != 2 {
		t.Fatalf("describe = %v", d)
	}
	get, del := d.Capabilities[0], d.Capabilities[1]
	if get.Kind != capgatev1.Kind_KIND_READ || !get.OwnerGuarded || get.Destructive || get.Permission != "notes.read" || get.Risk != capgatev1.Risk_RISK_UNSPECIFIED {
		t.Errorf("notes.get = %v", get)
	}
	if del.Kind != capgatev1.Kind_KIND_ACTION || del.OwnerGuarded || !del.Destructive || del.Risk != capgatev1.Risk_RISK_DANGEROUS {
		t.Errorf("notes.delete = %v", del)
	}
	// The host reads the levels in its own terms; an unspecified one,
	// from a plugin built before risk, is safe.
	for _, c := range []struct {
		desc *capgatev1.Capability
		want registry.Risk
	}{{get, registry.RiskSafe}, {del, registry.RiskDangerous}} {
		if rc, err := pluginwire.Capability(c.desc, "notes"); err != nil || rc.Risk != c.want {
			t.Errorf("%s: risk %q, %v; want %q", c.desc.Name, rc.Risk, err, c.want)
		}
	}
	unknown := &capgatev1.Capability{Name: "notes.odd", Kind: capgatev1.Kind_KIND_READ, Risk: capgatev1.Risk(99)}
	if _, err := pluginwire.Capability(unknown, "notes"); err == nil || !strings.Contains(err.Error(), "risk") {
		t.Errorf("an unknown risk level: %v; want an error naming the risk", err)
	}
	var in map[string]any
	if err := json.Unmarshal(get.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if in["type"] != "object" || in["required"].([]any)[0] != "id" {
		t.Errorf("input schema = %s", get.InputSchema)
	}
	var out map[string]any
	if err := json.Unmarshal(get.OutputSchema, &out); err != nil {
		t.Fatal(err)
	}
	if _, ok := out["properties"].(map[string]any)["text"]; !ok {
		t.Errorf("output schema = %s", get.OutputSchema)
	}
}

func TestInvoke(t *testing.T) {
	var cfg pluginConfig
	c := sdktest.Start(t, newNotes(&cfg), map[string]string{"greeting": "hey"})
	if cfg.Greeting != "hey" {
		t.Fatalf("config not delivered: %+v", cfg)
	}
	alice := sdk.Principal{Role: "customer", Scope: "read", UserID: "alice"}
	got := sdktest.Call[noteOut](t, c, "notes.get", alice, noteIn{ID: "n1"})
	if got.Text != "hi alice" || got.Owner != "alice" {
		t.Errorf("notes.get = %+v (principal must reach the handler)", got)
	}

	ctx := context.Background()
	for _, tc := range []struct {
		id   string
		code sdk.ErrorCode
	}{
		{"missing", sdk.CodeNotFound},
		{"bad", sdk.CodeInvalidInput},
		{"conflict", sdk.CodeConflict},
	} {
		_, err := c.Invoke(ctx, "notes.get", alice, noteIn{ID: tc.id})
		if sdk.CodeOf(err) != tc.code {
			t.Errorf("id %q: err %v; want code %v", tc.id, err, tc.code)
		}
	}
	// Internal failures and panics are no *sdk.Error: the agent learns
	// only that the call failed, and the plugin survives.
	for _, id := range []string{"fail", "boom"} {
		_, err := c.Invoke(ctx, "notes.get", alice, noteIn{ID: id})
		if err == nil || sdk.CodeOf(err) != 0 || sdk.IsRefused(err) || !strings.Contains(err.Error(), "notes.get failed") {
			t.Errorf("id %q: err %v; want an internal failure", id, err)
		}
	}
	// Arguments that break the input schema are refused by the gate before
	// the plugin sees them.
	_, err := c.Invoke(ctx, "notes.get", alice, json.RawMessage(`{"id": 7}`))
	if !sdk.IsInvalidInput(err) || !strings.Contains(err.Error(), "invalid arguments for notes.get") {
		t.Errorf("wrong-typed args: err %v", err)
	}
	_, err = c.Invoke(ctx, "notes.nope", alice, nil)
	if !errors.Is(err, sdk.ErrUnknownCapability) {
		t.Errorf("unknown capability: err %v, want sdk.ErrUnknownCapability", err)
	}
	if got := sdktest.Call[noteOut](t, c, "notes.get", alice, noteIn{ID: "n1"}); got.ID != "n1" {
		t.Errorf("plugin did not survive a panic: %+v", got)
	}
}

// TestOwnership: Owner decides the gate's ownership step in the same call,
// before the handler runs.
func TestOwnership(t *testing.T) {
	c := sdktest.Start(t, newNotes(&pluginConfig{}), nil)
	ctx := context.Background()
	bob := sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: "bob"}
	_, err := c.Invoke(ctx, "notes.get", bob, noteIn{ID: "n1"})
	if sdk.RefusedAt(err) != sdk.StepOwnership {
		t.Errorf("bob reading alice's note: err %v, want an ownership refusal", err)
	}
	// A handler that would run for bob says so in Text: it must not have.
	if _, err := c.Invoke(ctx, "notes.get", sdk.Principal{Role: "customer", Scope: sdk.ScopeRead}, noteIn{ID: "n1"}); sdk.RefusedAt(err) != sdk.StepOwnership {
		t.Errorf("a caller bound to no user: err %v, want an ownership refusal", err)
	}
	if _, err := c.Invoke(ctx, "notes.get", bob, noteIn{ID: "zz"}); !sdk.IsNotFound(err) {
		t.Errorf("a missing note: err %v, want NotFound", err)
	}
	admin := sdk.Principal{Role: "ops", Scope: sdk.ScopeAdmin, UserID: "ops"}
	if got := sdktest.Call[noteOut](t, c, "notes.get", admin, noteIn{ID: "n1"}); got.Text != "hi ops" {
		t.Errorf("admin reading alice's note = %+v", got)
	}
}

func TestConfigureErrors(t *testing.T) {
	_, err := sdktest.StartErr(t, newNotes(&pluginConfig{}), map[string]string{"greetin": "typo"})
	if err == nil || !strings.Contains(err.Error(), `unknown field "greetin"`) {
		t.Fatalf("typo in config: err = %v, want the unknown key named", err)
	}
}

// entity is a well-formed declaration of name with empty documents.
func entity(name, description, version string) sdk.Entity {
	return sdk.Entity{
		Name: name, Description: description, Version: version,
		Source: sdk.EntityFuncs{
			List:      func(context.Context, string, int) ([]sdk.Document, error) { return nil, nil },
			Get:       func(context.Context, []string) ([]sdk.Document, error) { return nil, nil },
			GetRecord: func(_ context.Context, id string) (any, error) { return nil, sdk.NotFound("no %s", id) },
		},
	}
}

func TestProvideEntity(t *testing.T) {
	d, err := sdktest.Start(t, newNotes(&pluginConfig{}), nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Entities) != 0 {
		t.Errorf("a plugin that declares none reports entities %v", d.Entities)
	}

	p := newNotes(&pluginConfig{})
	p.ProvideEntity(entity("notes.note", "a public note", "2"))
	p.ProvideEntity(entity("notes.folder_v2", "", ""))
	d, err = sdktest.Start(t, p, nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range d.Entities {
		got = append(got, e.Name+"="+e.Description+"@"+e.Version)
	}
	if want := []string{"notes.note=a public note@2", "notes.folder_v2=@"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("entities = %v; want %v in declaration order", got, want)
	}
}

func TestProvideEntityPanicsOnBadDeclarations(t *testing.T) {
	named := func(name string) func(p *sdk.Plugin) {
		return func(p *sdk.Plugin) { p.ProvideEntity(entity(name, "x", "")) }
	}
	without := func(drop func(*sdk.Entity)) func(p *sdk.Plugin) {
		return func(p *sdk.Plugin) {
			e := entity("notes.note", "x", "")
			drop(&e)
			p.ProvideEntity(e)
		}
	}
	for name, provide := range map[string]func(p *sdk.Plugin){
		"empty":         named(""),
		"upper case":    named("Notes.Note"),
		"hyphen":        named("notes-note"),
		"trailing dot":  named("notes."),
		"empty segment": named("notes..note"),
		"digit first":   named("notes.1"),
		"space":         named("notes note"),
		"duplicate": func(p *sdk.Plugin) {
			p.ProvideEntity(entity("notes.note", "x", "1"))
			p.ProvideEntity(entity("notes.note", "y", "2"))
		},
		"no Source": without(func(e *sdk.Entity) { e.Source = nil }),
		"no List": without(func(e *sdk.Entity) {
			f := e.Source.(sdk.EntityFuncs)
			f.List = nil
			e.Source = f
		}),
		"no GetRecord": without(func(e *sdk.Entity) {
			f := e.Source.(sdk.EntityFuncs)
			f.GetRecord = nil
			e.Source = f
		}),
		"a service that is no source": func(p *sdk.Plugin) {
			p.ProvideEntity(sdk.Entity{Name: "notes.note", Source: sdk.Configure(p,
				func(context.Context, sdk.Env, struct{}) (*noteOut, error) { return &noteOut{}, nil })})
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("no panic")
				}
				if msg, _ := r.(string); !strings.HasPrefix(msg, "sdk.ProvideEntity ") {
					t.Errorf("panic %v does not name sdk.ProvideEntity", r)
				}
			}()
			provide(sdk.New("x", "1"))
		})
	}
}

func TestAddPanicsOnBadDeclarations(t *testing.T) {
	h := func(ctx context.Context, call sdk.Call, in noteIn) (noteOut, error) { return noteOut{}, nil }
	for name, add := range map[string]func(p *sdk.Plugin){
		"nil handler": func(p *sdk.Plugin) { sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "a.b", Kind: sdk.Read}) },
		"no kind":     func(p *sdk.Plugin) { sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "a.b", Handler: h}) },
		"duplicate": func(p *sdk.Plugin) {
			sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "a.b", Kind: sdk.Read, Handler: h})
			sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "a.b", Kind: sdk.Read, Handler: h})
		},
		"unknown task support": func(p *sdk.Plugin) {
			sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "a.b", Kind: sdk.Read, Task: sdk.TaskSupport(7), Handler: h})
		},
		"non-object input": func(p *sdk.Plugin) {
			sdk.Add(p, sdk.Tool[string, noteOut]{Name: "a.b", Kind: sdk.Read,
				Handler: func(context.Context, sdk.Call, string) (noteOut, error) { return noteOut{}, nil }})
		},
		"unencodable output": func(p *sdk.Plugin) {
			sdk.Add(p, sdk.Tool[noteIn, struct{ C chan int }]{Name: "a.b", Kind: sdk.Read,
				Handler: func(context.Context, sdk.Call, noteIn) (struct{ C chan int }, error) {
					return struct{ C chan int }{}, nil
				}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			add(sdk.New("x", "1"))
		})
	}
}

// TestTaskSupport: a tool's task support reaches the host in the
// registry's terms; an unspecified one, from a plugin built before tasks,
// is forbidden, and one the host does not know is refused.
func TestTaskSupport(t *testing.T) {
	h := func(ctx context.Context, call sdk.Call, in noteIn) (noteOut, error) { return noteOut{}, nil }
	p := sdk.New("jobs", "1")
	sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "jobs.now", Kind: sdk.Read, Handler: h})
	sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "jobs.maybe", Kind: sdk.Read, Task: sdk.TaskOptional, Handler: h})
	sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "jobs.long", Kind: sdk.Read, Task: sdk.TaskRequired, Handler: h})
	d, err := sdktest.Start(t, p, nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		wire capgatev1.TaskSupport
		reg  registry.TaskSupport
	}{
		"jobs.now":   {capgatev1.TaskSupport_TASK_SUPPORT_FORBIDDEN, registry.TaskForbidden},
		"jobs.maybe": {capgatev1.TaskSupport_TASK_SUPPORT_OPTIONAL, registry.TaskOptional},
		"jobs.long":  {capgatev1.TaskSupport_TASK_SUPPORT_REQUIRED, registry.TaskRequired},
	}
	for _, c := range d.Capabilities {
		w := want[c.Name]
		if c.TaskSupport != w.wire {
			t.Errorf("%s: wire %v, want %v", c.Name, c.TaskSupport, w.wire)
		}
		if rc, err := pluginwire.Capability(c, "jobs"); err != nil || rc.TaskSupport != w.reg {
			t.Errorf("%s: registry %q, %v; want %q", c.Name, rc.TaskSupport, err, w.reg)
		}
	}
	old := &capgatev1.Capability{Name: "jobs.old", Kind: capgatev1.Kind_KIND_READ}
	if rc, err := pluginwire.Capability(old, "jobs"); err != nil || rc.TaskSupport != registry.TaskForbidden {
		t.Errorf("unspecified: %q, %v", rc.TaskSupport, err)
	}
	odd := &capgatev1.Capability{Name: "jobs.odd", Kind: capgatev1.Kind_KIND_READ, TaskSupport: capgatev1.TaskSupport(9)}
	if _, err := pluginwire.Capability(odd, "jobs"); err == nil || !strings.Contains(err.Error(), "task support") {
		t.Errorf("an unknown task support: %v", err)
	}
}

// TestKeep: what an Owner keeps reaches the Handler of the same call only.
func TestKeep(t *testing.T) {
	loads := 0
	p := sdk.New("kept", "1")
	sdk.Add(p, sdk.Tool[noteIn, noteOut]{Name: "kept.get", Kind: sdk.Read,
		Owner: func(_ context.Context, call sdk.Call, in noteIn) (string, error) {
			loads++
			call.Keep(noteOut{ID: in.ID, Owner: "alice", Text: "loaded once"})
			return "alice", nil
		},
		Handler: func(_ context.Context, call sdk.Call, in noteIn) (noteOut, error) {
			if n, ok := sdk.Kept[noteOut](call); ok && n.ID == in.ID {
				return n, nil
			}
			if _, ok := sdk.Kept[string](call); ok {
				t.Error("Kept answered for a type that was not kept")
			}
			loads++
			return noteOut{ID: in.ID, Owner: "alice", Text: "loaded by the handler"}, nil
		}})
	c := sdktest.Start(t, p, nil)
	alice := sdk.Principal{Role: "r", Scope: sdk.ScopeRead, UserID: "alice"}
	if got := sdktest.Call[noteOut](t, c, "kept.get", alice, noteIn{ID: "n1"}); got.Text != "loaded once" || loads != 1 {
		t.Errorf("owner-checked call = %+v after %d loads; want the Owner's load kept for the handler", got, loads)
	}
	// An admin's call asks no Owner: nothing is kept, the handler loads.
	admin := sdk.Principal{Role: "r", Scope: sdk.ScopeAdmin, UserID: "ops"}
	if got := sdktest.Call[noteOut](t, c, "kept.get", admin, noteIn{ID: "n1"}); got.Text != "loaded by the handler" || loads != 2 {
		t.Errorf("admin call = %+v after %d loads", got, loads)
	}
}
