// Command publisher is a test plugin that publishes the events its config
// lists while it is configured, and fails configuration with the host's
// answer when one is refused.
package main

import (
	"context"
	"fmt"

	"github.com/capgate/capgate/sdk"
)

type config struct {
	Events []struct {
		Type   string         `json:"type"`
		Entity string         `json:"entity"`
		ID     string         `json:"id"`
		UserID string         `json:"user_id"`
		Data   map[string]any `json:"data"`
	} `json:"events"`
}

func main() {
	p := sdk.New("publisher", "0.0.1")
	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
		var cfg config
		if err := env.DecodeConfig(&cfg); err != nil {
			return err
		}
		for i, e := range cfg.Events {
			ev := sdk.Event{Type: e.Type, Entity: e.Entity, ID: e.ID, UserID: e.UserID}
			if e.Data != nil {
				ev.Data = e.Data
			}
			if _, err := env.Publish(ctx, ev); err != nil {
				return fmt.Errorf("events[%d]: %w", i, err)
			}
		}
		return nil
	})
	sdk.Serve(p)
}
