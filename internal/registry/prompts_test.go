package registry

import (
	"strings"
	"testing"
)

func TestAddPromptValid(t *testing.T) {
	r := New([]string{"booking"})
	if err := r.Add(Capability{Name: "booking.get", Kind: Read, Pack: "booking", InputSchema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"booking.plan_visit", "test_simple_prompt", "a.b"} {
		if err := r.AddPrompt(Prompt{Name: name, Pack: "booking", Permission: "booking.read",
			Arguments: []PromptArgument{{Name: "resourceUri", Required: true}, {Name: "arg-2"}}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	got := r.Prompts()
	if len(got) != 3 || got[0].Name != "a.b" || got[2].Name != "test_simple_prompt" {
		t.Fatalf("prompts not in name order: %v", got)
	}
	if _, ok := r.LookupPrompt("booking.plan_visit"); !ok {
		t.Fatal("lookup failed")
	}
	if c := got[1].Capability(); c.Kind != Read || c.Pack != "booking" || c.Permission != "booking.read" || c.Name != "booking.plan_visit" {
		t.Fatalf("capability view %+v", c)
	}
}

func TestAddPromptReportsEveryProblem(t *testing.T) {
	r := New([]string{"booking"})
	if err := r.Add(Capability{Name: "booking.get", Kind: Read, Pack: "booking", InputSchema: []byte(`{"type":"object"}`), Plugin: "booking"}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPrompt(Prompt{Name: "booking.visit", Pack: "booking", Plugin: "booking"}); err != nil {
		t.Fatal(err)
	}
	err := r.AddPrompt(Prompt{
		Name: "booking.get", Pack: "nope", Permission: "booking.*", Title: strings.Repeat("t", MaxPromptTitleBytes+1),
		Description: "\xff",
		Arguments:   []PromptArgument{{Name: "ok"}, {Name: "ok"}, {Name: "1bad"}, {Name: "long", MaxLength: MaxPromptArgumentLength + 1}},
	})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`prompt "booking.get"`, `a capability of plugin "booking" has this name`, `unknown pack "nope"`,
		`permission "booking.*"`, "title is 257 bytes", "description is not valid UTF-8",
		`argument "ok": declared twice`, "argument 2: name must match", `argument "long": max length`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	cases := map[string]Prompt{
		`already provided by plugin "booking"`: {Name: "booking.visit", Pack: "booking"},
		"name must be lower-case":              {Name: "Booking", Pack: "booking"},
		"at most 128 characters":               {Name: strings.Repeat("a", 129), Pack: "booking"},
		"33 arguments, more than 32":           {Name: "many", Pack: "booking", Arguments: manyArgs(33)},
	}
	for want, p := range cases {
		if err := r.AddPrompt(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	if len(r.Prompts()) != 1 {
		t.Fatalf("a refused prompt was registered: %d", len(r.Prompts()))
	}
}

func manyArgs(n int) []PromptArgument {
	out := make([]PromptArgument, n)
	for i := range out {
		out[i].Name = "a" + strings.Repeat("x", i)
	}
	return out
}

func TestPromptCheckArguments(t *testing.T) {
	p := &Prompt{Name: "p", Arguments: []PromptArgument{{Name: "need", Required: true, MaxLength: 3}, {Name: "may"}}}
	ok := []map[string]string{{"need": "abc"}, {"need": "äöü", "may": ""}}
	for _, args := range ok {
		if err := p.CheckArguments(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	bad := map[string]map[string]string{
		`needs argument "need"`:                  nil,
		`takes no argument "other"`:              {"need": "a", "other": "x"},
		"has 4 characters, more than its limit":  {"need": "abcd"},
		"not valid UTF-8":                        {"need": "\xff"},
		"more than its limit of 4096":            {"need": "a", "may": strings.Repeat("x", DefaultPromptArgumentLength+1)},
		strings.Repeat("z", 64) + `…" (it takes`: {"need": "a", strings.Repeat("z", 500): "x"},
	}
	for want, args := range bad {
		if err := p.CheckArguments(args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}
