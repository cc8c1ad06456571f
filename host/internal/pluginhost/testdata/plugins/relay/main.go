// Command relay is a test plugin whose one capability calls another
// capability through the host as its caller (sdk.Call.Invoke) and reports
// what came back, so tests can see the gate decide nested calls.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/capgate/capgate/sdk"
)

type in struct {
	Capability string         `json:"capability"`
	Args       map[string]any `json:"args,omitempty"`
	// CallID, when set, replaces the call's id: a forged id.
	CallID string `json:"call_id,omitempty"`
}

type out struct {
	Result  json.RawMessage `json:"result,omitempty"`
	Refused string          `json:"refused,omitempty"` // the refusing gate step
	Error   string          `json:"error,omitempty"`
}

func main() {
	p := sdk.New("relay", "1")
	sdk.Add(p, sdk.Tool[in, out]{
		Name: "relay.call", Description: "Call a capability as the caller.", Kind: sdk.Read,
		Pack: "relay", Permission: "relay.use",
		Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) {
			if in.CallID != "" {
				call.ID = in.CallID
			}
			res, err := call.Invoke(ctx, in.Capability, in.Args)
			var refused *sdk.RefusedError
			switch {
			case err == nil:
				return out{Result: res}, nil
			case errors.As(err, &refused):
				return out{Refused: string(refused.Step)}, nil
			}
			return out{Error: err.Error()}, nil
		},
	})
	sdk.Serve(p)
}
