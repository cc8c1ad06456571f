package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
	"github.com/capgate/capgate/internal/registry"
)

// promptPlugin renders prompts and completes their arguments, recording
// what reached it.
type promptPlugin struct {
	gets, completes []string
	fail            error
	result          dispatch.PromptResult
	values          []string
}

func (p *promptPlugin) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

func (p *promptPlugin) ReadResource(context.Context, dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
	return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: "none"}
}

func (p *promptPlugin) GetPrompt(_ context.Context, r dispatch.PromptRequest) (dispatch.PromptResult, error) {
	p.gets = append(p.gets, r.Prompt+" "+r.Principal.UserID)
	if p.fail != nil {
		return dispatch.PromptResult{}, p.fail
	}
	if p.result.Messages != nil {
		return p.result, nil
	}
	return dispatch.PromptResult{Messages: []dispatch.PromptMessage{{Role: "user", Content: dispatch.Content{Type: dispatch.ContentText, Text: "hi " + r.Args["who"]}}}}, nil
}

func (p *promptPlugin) Complete(_ context.Context, r dispatch.CompleteRequest) (dispatch.Completion, error) {
	p.completes = append(p.completes, r.Prompt+r.ResourceTemplate+" "+r.Argument+"="+r.Value)
	if p.fail != nil {
		return dispatch.Completion{}, p.fail
	}
	return dispatch.Completion{Values: p.values, Total: len(p.values)}, nil
}

func newPromptGate(t *testing.T, policy dispatch.Policy) (*dispatch.Dispatcher, *promptPlugin) {
	t.Helper()
	reg := registry.New([]string{"notes", "off"})
	if err := reg.Add(registry.Capability{Name: "notes.list", Kind: registry.Read, Pack: "notes", Plugin: "notes",
		InputSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []registry.Prompt{
		{Name: "notes.open", Pack: "notes", Plugin: "notes", Arguments: []registry.PromptArgument{{Name: "who", Required: true, Completes: true}, {Name: "plain"}}},
		{Name: "notes.private", Pack: "notes", Permission: "notes.private", Plugin: "notes", Arguments: []registry.PromptArgument{{Name: "who", Completes: true}}},
		{Name: "notes.off", Pack: "off", Plugin: "notes"},
		{Name: "notes.switched", Pack: "notes", Plugin: "notes"},
	} {
		if err := reg.AddPrompt(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.AddResourceTemplate(registry.ResourceTemplate{URITemplate: "notes://{id}", Name: "note", Pack: "notes", Permission: "notes.private", Plugin: "notes"}); err != nil {
		t.Fatal(err)
	}
	pp := &promptPlugin{values: []string{"ann", "anna"}}
	d, err := dispatch.New(reg, policy, map[string]dispatch.Provider{"notes": pp})
	if err != nil {
		t.Fatal(err)
	}
	return d, pp
}

func promptPolicy() dispatch.Policy {
	return dispatch.Policy{
		Packs:                map[string]bool{"notes": true, "off": false},
		Roles:                map[string][]string{"owner": {"notes.*"}, "viewer": {"notes.read"}},
		DisabledCapabilities: []string{"notes.switched"},
	}
}

// TestPromptGatingMatrix: for every principal and prompt, listing,
// getting and completing agree: what is not listed cannot be got or
// completed, and the answer is the one for a prompt that does not exist.
func TestPromptGatingMatrix(t *testing.T) {
	ctx := context.Background()
	d, pp := newPromptGate(t, promptPolicy())
	principals := map[string]dispatch.Principal{
		"owner":     {Role: "owner", Scope: dispatch.ScopeRead, UserID: "u1"},
		"viewer":    {Role: "viewer", Scope: dispatch.ScopeAction, UserID: "u2"},
		"unbound":   {Role: "viewer", Scope: dispatch.ScopeRead},
		"bad scope": {Role: "owner", Scope: "superuser", UserID: "u3"},
	}
	want := map[string][]string{
		"owner":     {"notes.open", "notes.private"},
		"viewer":    {"notes.open"},
		"unbound":   {"notes.open"}, // a prompt is a read: no user needed
		"bad scope": nil,
	}
	for who, p := range principals {
		var listed []string
		for _, pr := range d.VisiblePrompts(p) {
			listed = append(listed, pr.Name)
		}
		if !slices.Equal(listed, want[who]) {
			t.Errorf("%s sees %v, want %v", who, listed, want[who])
		}
		for _, name := range []string{"notes.open", "notes.private", "notes.off", "notes.switched", "notes.none"} {
			visible := slices.Contains(want[who], name)
			_, err := d.GetPrompt(ctx, p, name, map[string]string{"who": "x"})
			if visible != (err == nil) || (!visible && !errors.Is(err, dispatch.ErrUnknownPrompt)) {
				t.Errorf("%s gets %s: %v (visible %v)", who, name, err, visible)
			}
			_, err = d.CompletePrompt(ctx, p, name, "who", "a", nil)
			if visible != (err == nil) || (!visible && !errors.Is(err, dispatch.ErrUnknownPrompt)) {
				t.Errorf("%s completes %s: %v (visible %v)", who, name, err, visible)
			}
		}
	}
	// Nothing invisible reached the plugin.
	for _, c := range append(pp.gets, pp.completes...) {
		if !strings.HasPrefix(c, "notes.open") && !strings.HasPrefix(c, "notes.private u1") && !strings.HasPrefix(c, "notes.private who") {
			t.Errorf("the plugin was asked %q", c)
		}
	}
	// The template is gated as a read of its pack and permission.
	if _, err := d.CompleteResourceTemplate(ctx, principals["viewer"], "notes://{id}", "id", "", nil); !errors.Is(err, dispatch.ErrUnknownResourceTemplate) {
		t.Errorf("viewer completes the template: %v", err)
	}
	if res, err := d.CompleteResourceTemplate(ctx, principals["owner"], "notes://{id}", "id", "an", nil); err != nil || len(res.Values) != 2 {
		t.Errorf("owner completes the template: %+v %v", res, err)
	}
	for _, tc := range []struct{ arg, value, msg string }{
		{"name", "", `has no variable "name"`},
		{"id", strings.Repeat("x", registry.DefaultPromptArgumentLength+1), "more than its limit"},
	} {
		_, err := d.CompleteResourceTemplate(ctx, principals["owner"], "notes://{id}", tc.arg, tc.value, nil)
		var te *dispatch.ToolError
		if !errors.As(err, &te) || !strings.Contains(te.Message, tc.msg) {
			t.Errorf("%s: %v", tc.arg, err)
		}
	}
}

func TestGetPromptChecks(t *testing.T) {
	ctx := context.Background()
	d, pp := newPromptGate(t, promptPolicy())
	owner := dispatch.Principal{Role: "owner", Scope: dispatch.ScopeRead, UserID: "u1"}
	res, err := d.GetPrompt(ctx, owner, "notes.open", map[string]string{"who": "ann"})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Content.Text != "hi ann" {
		t.Fatalf("%+v %v", res, err)
	}
	n := len(pp.gets)
	for _, args := range []map[string]string{nil, {"who": "a", "other": "b"}, {"who": "\xff"}} {
		_, err := d.GetPrompt(ctx, owner, "notes.open", args)
		var te *dispatch.ToolError
		if !errors.As(err, &te) || te.Code != dispatch.InvalidInput {
			t.Errorf("%v: %v", args, err)
		}
	}
	if len(pp.gets) != n {
		t.Fatal("bad arguments reached the plugin")
	}
	// The plugin's answer is checked before anyone sees it.
	for _, bad := range []dispatch.PromptResult{
		{Messages: []dispatch.PromptMessage{}},
		{Messages: []dispatch.PromptMessage{{Role: "system"}}},
		{Messages: make([]dispatch.PromptMessage, dispatch.MaxPromptMessages+1)},
	} {
		pp.result = bad
		if bad.Messages != nil && len(bad.Messages) == 0 {
			pp.result.Messages = []dispatch.PromptMessage{}
		}
		if _, err := d.GetPrompt(ctx, owner, "notes.open", map[string]string{"who": "a"}); err == nil {
			t.Errorf("%d messages accepted", len(bad.Messages))
		}
	}
	pp.result = dispatch.PromptResult{}
	// Completion: at most 100 values, each bounded; an argument the plugin
	// does not complete is not asked.
	pp.values = make([]string, 150)
	for i := range pp.values {
		pp.values[i] = fmt.Sprint(i)
	}
	pp.values[0] = strings.Repeat("x", dispatch.MaxCompletionValueBytes+1)
	c, err := d.CompletePrompt(ctx, owner, "notes.open", "who", "", nil)
	if err != nil || len(c.Values) != 100 || !c.HasMore || c.Values[0] != "1" || c.Total != 150 {
		t.Fatalf("%d values, more %v, total %d, first %q: %v", len(c.Values), c.HasMore, c.Total, c.Values[0], err)
	}
	before := len(pp.completes)
	if c, err := d.CompletePrompt(ctx, owner, "notes.open", "plain", "", nil); err != nil || len(c.Values) != 0 || c.Values == nil || len(pp.completes) != before {
		t.Fatalf("plain: %+v %v", c, err)
	}
	pp.fail = &dispatch.ToolError{Code: dispatch.NotFound, Message: "gone"}
	if _, err := d.GetPrompt(ctx, owner, "notes.open", map[string]string{"who": "a"}); !errors.Is(err, pp.fail) {
		t.Fatalf("tool error: %v", err)
	}
}

// TestPromptAuditAndLimits: with an auditor every prompt call leaves one
// record, the real refusal kept behind an unknown prompt; rate limits
// count prompts as calls.
func TestPromptAuditAndLimits(t *testing.T) {
	ctx := dispatch.WithOrigin(context.Background(), dispatch.Origin{Protocol: "mcp", RequestID: "9"})
	policy := promptPolicy()
	policy.Limits = dispatch.Limits{Capabilities: map[string]dispatch.Rate{"notes.open": {Count: 2, Per: time.Hour}}}
	d, pp := newPromptGate(t, policy)
	d.UseLimiter(ratelimit.NewMemory())
	a := &trail{}
	d.UseAuditor(a, true)
	viewer := dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeRead, UserID: "u2", Token: "t"}
	if _, err := d.GetPrompt(ctx, viewer, "notes.open", map[string]string{"who": "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CompletePrompt(ctx, viewer, "notes.open", "who", "a", nil); err != nil {
		t.Fatal(err)
	}
	_, err := d.GetPrompt(ctx, viewer, "notes.open", map[string]string{"who": "a"})
	var r *dispatch.Refusal
	if !errors.As(err, &r) || r.Step != dispatch.StepRateLimit || r.RetryAfter <= 0 {
		t.Fatalf("third call: %v", err)
	}
	if _, err := d.GetPrompt(ctx, viewer, "notes.private", nil); !errors.Is(err, dispatch.ErrUnknownPrompt) {
		t.Fatal(err)
	}
	if _, err := d.GetPrompt(ctx, viewer, "notes.none", nil); !errors.Is(err, dispatch.ErrUnknownPrompt) {
		t.Fatal(err)
	}
	pp.fail = errors.New("disk on fire")
	_, err = d.CompleteResourceTemplate(ctx, dispatch.Principal{Role: "owner", Scope: dispatch.ScopeRead}, "notes://{id}", "id", "", nil)
	var ie *dispatch.InternalError
	if !errors.As(err, &ie) || !strings.HasPrefix(ie.Ref, "rec-") {
		t.Fatalf("internal failure: %v", err)
	}
	recs := a.take()
	type seen struct {
		capability, plugin string
		step               dispatch.Step
		failed             bool
	}
	var got []seen
	for _, rec := range recs {
		s := seen{capability: rec.Capability, plugin: rec.Plugin, failed: rec.Err != nil}
		if rec.Refusal != nil {
			s.step = rec.Refusal.Step
		}
		if rec.Origin.RequestID != "9" || rec.ID == "" || rec.Principal.UserID != viewer.UserID && rec.Principal.Role != "owner" {
			t.Errorf("record %+v", rec)
		}
		got = append(got, s)
	}
	wantSeen := []seen{
		{"prompts/get:notes.open", "notes", "", false},
		{"completion/complete:notes.open", "notes", "", false},
		{"prompts/get:notes.open", "notes", dispatch.StepRateLimit, false},
		{"prompts/get:notes.private", "notes", dispatch.StepPermission, false},
		{"prompts/get:notes.none", "", dispatch.StepUnknown, false},
		{"completion/complete:notes://{id}", "notes", "", true},
	}
	if !slices.Equal(got, wantSeen) {
		t.Fatalf("records\n got %+v\nwant %+v", got, wantSeen)
	}
	if string(recs[0].Args) != `{"who":"a"}` || string(recs[1].Args) != `{"argument":"who","value":"a"}` {
		t.Errorf("args %s %s", recs[0].Args, recs[1].Args)
	}
}
