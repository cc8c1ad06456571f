package stdio

import (
	"encoding/json"
	"testing"
)

// A call's progress and log messages, which capgate streams on the POST's
// event stream, reach the stdio client as lines of their own before the
// call's answer.
func TestCallNoticesRelayed(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})
	s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + capChatty + `","arguments":{},"_meta":{"progressToken":"p-1"}}}`)
	var got []string
	for {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProgressToken string  `json:"progressToken"`
				Progress      float64 `json:"progress"`
				Level         string  `json:"level"`
			} `json:"params"`
		}
		line := s.recv()
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch {
		case m.Method == "notifications/progress" && m.Params.ProgressToken == "p-1":
			got = append(got, "progress")
		case m.Method == "notifications/message" && m.Params.Level == "info":
			got = append(got, "log")
		case string(m.ID) == "2":
			got = append(got, "answer")
		default:
			t.Fatalf("unexpected line %s", line)
		}
		if string(m.ID) == "2" {
			break
		}
	}
	if want := "progress log progress answer"; joinWords(got) != want {
		t.Fatalf("the client read %v, want %s", got, want)
	}
}

func joinWords(w []string) string {
	s := ""
	for i, x := range w {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}
