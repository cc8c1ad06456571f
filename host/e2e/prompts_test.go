package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKPrompts: the official Go client lists, gets and completes the
// booking plugin's prompt at every revision, through the gate: alice's
// completion offers her active bookings, and a guest (no booking.read)
// neither sees the prompt nor gets or completes it.
func TestGoSDKPrompts(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			alice := connect(t, h, tokenAlice, version)
			if alice.InitializeResult().Capabilities.Prompts == nil || alice.InitializeResult().Capabilities.Completions == nil {
				t.Fatalf("prompts or completions not declared: %+v", alice.InitializeResult().Capabilities)
			}
			list, err := alice.ListPrompts(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range list.Prompts {
				names = append(names, p.Name)
			}
			if !slices.Contains(names, "booking.plan_visit") {
				t.Fatalf("prompts/list as alice: %v", names)
			}
			var active []string
			for _, b := range listBookings(t, alice, "alice") {
				if b.Status == "active" {
					active = append(active, b.ID)
				}
			}
			comp, err := alice.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "booking.plan_visit"},
				Argument: mcp.CompleteParamsArgument{Name: "booking", Value: "bk_"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(comp.Completion.Values, active) || len(active) == 0 {
				t.Fatalf("completion as alice: %v, want her active bookings %v", comp.Completion.Values, active)
			}
			got, err := alice.GetPrompt(ctx, &mcp.GetPromptParams{Name: "booking.plan_visit",
				Arguments: map[string]string{"booking": active[0], "note": "first visit"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Messages) != 2 {
				t.Fatalf("messages: %+v", got.Messages)
			}
			text, ok := got.Messages[1].Content.(*mcp.TextContent)
			if !ok || !strings.Contains(text.Text, active[0]) || !strings.Contains(text.Text, "first visit") {
				t.Fatalf("second message: %#v", got.Messages[1].Content)
			}
			if version != "2025-03-26" {
				if link, ok := got.Messages[0].Content.(*mcp.ResourceLink); !ok || !strings.HasPrefix(link.URI, "capgate://booking.resource/") {
					t.Fatalf("first message: %#v", got.Messages[0].Content)
				}
			}

			guest := connect(t, h, tokenGuest, version)
			if list, err := guest.ListPrompts(ctx, nil); err != nil || len(list.Prompts) != 0 {
				t.Fatalf("prompts/list as guest: %+v %v", list, err)
			}
			_, err = guest.GetPrompt(ctx, &mcp.GetPromptParams{Name: "booking.plan_visit", Arguments: map[string]string{"booking": active[0]}})
			if err == nil || !strings.Contains(err.Error(), "unknown prompt") {
				t.Fatalf("prompts/get as guest: %v", err)
			}
			_, err = guest.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "booking.plan_visit"},
				Argument: mcp.CompleteParamsArgument{Name: "booking", Value: ""},
			})
			if err == nil || !strings.Contains(err.Error(), "unknown prompt") {
				t.Fatalf("completion as guest: %v", err)
			}
		})
	}
}

// TestGoSDKTemplateCompletion: the official Go client completes a
// variable of a plugin's resource template (answered by the plugin,
// through the gate) and the id of a catalogue record template (from
// platform.list, as the caller), at every revision; a template no plugin
// declares is unknown.
func TestGoSDKTemplateCompletion(t *testing.T) {
	needE2E(t)
	h := startProbeHost(t)
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			alice := connect(t, h, tokenAlice, version)
			complete := func(uri, arg, value string) (*mcp.CompleteResult, error) {
				return alice.Complete(ctx, &mcp.CompleteParams{
					Ref: &mcp.CompleteReference{Type: "ref/resource", URI: uri}, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}})
			}
			res, err := complete("probe://rooms/{room}/plan", "room", "b")
			if err != nil || !slices.Equal(res.Completion.Values, []string{"borealis"}) {
				t.Fatalf("plan room: %+v %v", res, err)
			}
			res, err = complete("capgate://booking.resource/{id}", "id", "room-a")
			if err != nil || !slices.Contains(res.Completion.Values, "room-aurora") {
				t.Fatalf("catalogue id: %+v %v", res, err)
			}
			for _, v := range res.Completion.Values {
				if !strings.HasPrefix(v, "room-a") {
					t.Errorf("catalogue id suggestion %q does not start with room-a", v)
				}
			}
			if _, err := complete("probe://nothing/{x}", "x", ""); err == nil || !strings.Contains(err.Error(), "unknown resource template") {
				t.Fatalf("unknown template: %v", err)
			}
		})
	}
}
