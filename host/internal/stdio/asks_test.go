package stdio

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/confirm"
	"github.com/capgate/capgate/host/internal/server"
)

// A call at a revision before 2026-07-28 that asks its client sends the
// request on its event stream: the bridge writes it to the client as a
// line of its own, forwards the client's answer line to capgate, and then
// writes the call's answer.
func TestAskRelayed(t *testing.T) {
	c := startCapgate(t, func(o *server.Options) {
		store, err := approvals.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), approvals.FileName), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		sealer, err := confirm.New([]byte(strings.Repeat("k", 32)), time.Minute, store)
		if err != nil {
			t.Fatal(err)
		}
		o.Dispatcher.UseConfirmer(sealer)
		if o.Answers, err = answers.New(answers.Options{}); err != nil {
			t.Fatal(err)
		}
	})
	s := bridge(t, Options{URL: c.url, Token: userToken, MaxInFlight: 1})
	s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + capAsk + `","arguments":{}}}`)
	var ask struct {
		ID     string `json:"id"`
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	line := s.recv()
	if err := json.Unmarshal([]byte(line), &ask); err != nil || ask.Method != "elicitation/create" || ask.Params.Message != "Your name?" || !answers.IsID(ask.ID) {
		t.Fatalf("the client read %s; want capgate's elicitation request", line)
	}
	// One slot for calls, and the call waiting holds it: the answer
	// still goes through.
	s.send(`{"jsonrpc":"2.0","id":"` + ask.ID + `","result":{"action":"accept","content":{"name":"Ada"}}}`)
	line = s.recv()
	var res struct {
		ID     int `json:"id"`
		Result struct {
			StructuredContent struct {
				Answer struct {
					Content struct {
						Name string `json:"name"`
					} `json:"content"`
				} `json:"answer"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil || res.ID != 2 || res.Result.StructuredContent.Answer.Content.Name != "Ada" {
		t.Fatalf("the client read %s; want the call's answer with the name", line)
	}
}
