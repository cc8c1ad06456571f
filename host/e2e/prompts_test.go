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
