package mcptest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Chatty tells its caller of its progress and logs while it runs
// (WithChatty). Its arguments: steps, the progress reports to send (each
// out of steps, one repeated, which must not reach the client); hold,
// to wait for ChattyRelease or the call's end after them.
const Chatty = "platform.chatty"

// WithChatty registers platform.chatty (pack diag, permission diag.run).
func WithChatty() Option { return func(s *setup) { s.chatty = true } }

func addChatty(reg *registry.Registry) {
	if err := reg.Add(registry.Capability{Name: Chatty, Description: "Report progress and log while running.", Kind: registry.Read,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"integer","minimum":0,"maximum":10000},"hold":{"type":"boolean"}}}`),
		Pack:        "diag", Permission: "diag.run", Plugin: "core"}); err != nil {
		panic(fmt.Sprintf("mcptest: %v", err))
	}
}

// invokeChatty runs platform.chatty; ok is false for any other capability.
// It sends what a plugin would, whatever the caller asked: filtering is
// the host's.
func (p *Platform) invokeChatty(ctx context.Context, r dispatch.Request) (_ json.RawMessage, _ error, ok bool) {
	if r.Capability != Chatty {
		return nil, nil, false
	}
	var in struct {
		Steps int  `json:"steps"`
		Hold  bool `json:"hold"`
	}
	if err := json.Unmarshal(r.Args, &in); err != nil {
		return nil, err, true
	}
	n := dispatch.NoticesOf(ctx)
	say := func(x dispatch.Notice) {
		if n != nil && n.Wants().Allows(x) {
			n.Notify(x)
		}
	}
	say(dispatch.Notice{Log: &dispatch.LogMessage{Level: dispatch.LogDebug, Logger: "chatty", Data: json.RawMessage(`"debug detail"`)}})
	say(dispatch.Notice{Log: &dispatch.LogMessage{Level: dispatch.LogInfo, Logger: "chatty", Data: json.RawMessage(`{ "step" : "started" }`)}})
	for i := 1; i <= in.Steps; i++ {
		say(dispatch.Notice{Progress: &dispatch.Progress{Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)}})
		if i == 1 {
			say(dispatch.Notice{Progress: &dispatch.Progress{Progress: 1, Total: float64(in.Steps), Message: "again"}})
		}
	}
	say(dispatch.Notice{Log: &dispatch.LogMessage{Level: dispatch.LogError, Data: json.RawMessage(`"went wrong"`)}})
	if in.Hold {
		var err error
		select {
		case <-p.ChattyRelease:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if p.ChattyEnded != nil {
			p.ChattyEnded <- err
		}
		if err != nil {
			return nil, err, true
		}
	}
	return json.RawMessage(`{"ok":true}`), nil, true
}
