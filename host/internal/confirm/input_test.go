package confirm_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/confirm"
	"github.com/capgate/capgate/internal/dispatch"
)

// TestRoundSealed: a round's state carries the plugin's own state, the
// round and the question its user confirmed back to exactly its call,
// once; altered, foreign, lapsed or another call's states are refused,
// each saying why, and none of them uses the state up.
func TestRoundSealed(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	store := sqliteStore(t)
	s := sealer(t, store, c)
	q := question()
	kept := bytes.Repeat([]byte{0, 1, 0xff, 'x'}, 3<<10) // a plugin's state at its bound, binary
	state, st, err := s.SealInput(ctx, q, dispatch.InputState{Plugin: kept, Round: 2, Confirmed: "cf_earlier"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.ID, "in_") || !st.ExpiresAt.Equal(c.now().Add(5*time.Minute)) || len(state) > confirm.MaxStateBytes {
		t.Fatalf("sealed %+v in %d bytes", st, len(state))
	}
	parts := strings.Split(state, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(`"r":2`), []byte(`"r":9`), 1)) + "." + parts[2]
	otherKey, _ := confirm.New([]byte(strings.Repeat("k", 32)), time.Minute, store)
	foreign, _, _ := otherKey.WithClock(c.now).SealInput(ctx, q, dispatch.InputState{})
	other := func(mut func(*dispatch.Question)) dispatch.Question {
		o := question()
		mut(&o)
		return o
	}
	for _, tc := range []struct {
		name, state string
		q           dispatch.Question
		why         string
	}{
		{"tampered", state + "-TAMPERED", q, "not one this server made"},
		{"altered body", forged, q, "not one this server made"},
		{"another key", foreign, q, "not one this server made"},
		{"another token", state, other(func(o *dispatch.Question) { o.Principal.Token = "bob-phone" }), "another token"},
		{"another user", state, other(func(o *dispatch.Question) { o.Principal.UserID = "bob" }), "another token"},
		{"another capability", state, other(func(o *dispatch.Question) { o.Capability = "booking.cancel" }), "another capability"},
		{"other arguments", state, other(func(o *dispatch.Question) { o.Args = json.RawMessage(`{"name":"Room 8"}`) }), "other arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.OpenInput(ctx, tc.state, tc.q)
			if !errors.Is(err, dispatch.ErrConfirmationState) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "round") && tc.why != "not one this server made" {
				t.Fatalf("OpenInput: %v; want refused: %s", err, tc.why)
			}
		})
	}
	got, err := s.OpenInput(ctx, state, q)
	if err != nil {
		t.Fatalf("the genuine state after the refused ones: %v", err)
	}
	if got.ID != st.ID || got.Round != 2 || got.Confirmed != "cf_earlier" || !bytes.Equal(got.Plugin, kept) {
		t.Fatalf("opened %+v; want the sealed round back", got)
	}
	if _, err := s.OpenInput(ctx, state, q); !errors.Is(err, dispatch.ErrConfirmationState) || !strings.Contains(err.Error(), "answered before") {
		t.Fatalf("a replay: %v; want it refused as answered before", err)
	}
	late, _, _ := s.SealInput(ctx, q, dispatch.InputState{})
	c.advance(5 * time.Minute)
	if _, err := s.OpenInput(ctx, late, q); !errors.Is(err, dispatch.ErrConfirmationState) || !strings.Contains(err.Error(), "lapsed") {
		t.Fatalf("a lapsed round: %v; want refused as lapsed", err)
	}
}

// TestRoundAndQuestionKeptApart: a question's state is not a round's
// (the gate then reads it as its question's), and a round's does not
// answer a question.
func TestRoundAndQuestionKeptApart(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	s := sealer(t, sqliteStore(t), c)
	q := question()
	asked, _ := s.Ask(ctx, q)
	if _, err := s.OpenInput(ctx, asked.State, q); !errors.Is(err, dispatch.ErrNotInputState) {
		t.Fatalf("a question's state opened as a round's: %v", err)
	}
	round, _, _ := s.SealInput(ctx, q, dispatch.InputState{Round: 1})
	if _, err := s.Answered(ctx, round, q); !errors.Is(err, dispatch.ErrConfirmationState) {
		t.Fatalf("a round's state answered a question: %v", err)
	}
	// Neither used the other up.
	if _, err := s.Answered(ctx, asked.State, q); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenInput(ctx, round, q); err != nil {
		t.Fatal(err)
	}
	// A plugin's state over the bound cannot be sealed.
	if _, _, err := s.SealInput(ctx, q, dispatch.InputState{Plugin: make([]byte, confirm.MaxStateBytes)}); err == nil {
		t.Fatal("sealed a state over the bound")
	}
}
