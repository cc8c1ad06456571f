package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/tasks"
)

// twoAsks is a round that asks two things at once.
func twoAsks() tasks.Park {
	return tasks.Park{
		Requests: []tasks.Request{
			{Key: "first", Method: "elicitation/create", Params: json.RawMessage(`{"message":"name?"}`)},
			{Key: "second", Method: "elicitation/create", Params: json.RawMessage(`{"message":"sure?"}`)},
		},
		State:   "sealed-1",
		Call:    []byte(`{"arguments":{"x":1}}`),
		Message: "waiting for the client",
	}
}

func accept(v string) json.RawMessage {
	return json.RawMessage(`{"action":"accept","content":{"v":"` + v + `"}}`)
}

func ids(rs []tasks.Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

type setupFunc func(t *testing.T) (*tasks.Store, opener, *clock)

// runInputContract is the contract of a task that waits on its client,
// run on each engine by runContract.
func runInputContract(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("ParkAnswerResume", func(t *testing.T) {
		s, _, c := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		c.advance(time.Second)
		if ok, err := s.Park(ctx, tk.ID, 0, twoAsks()); err != nil || !ok {
			t.Fatalf("park: %v %v", ok, err)
		}
		got, err := s.Get(ctx, alice, tk.ID)
		if err != nil || got.Status != tasks.InputRequired || got.Round != 1 || got.Message != "waiting for the client" ||
			!got.UpdatedAt.Equal(c.now()) {
			t.Fatalf("parked: %+v %v", got, err)
		}
		// The IDs are the store's, the keys the call's, in the order asked.
		if strings.Join(ids(got.Pending), ",") != "r1-first,r1-second" || got.Pending[0].Key != "first" ||
			got.Pending[1].Method != "elicitation/create" || string(got.Pending[1].Params) != `{"message":"sure?"}` {
			t.Fatalf("pending %+v", got.Pending)
		}
		// A second park of the same run does nothing: it is not working.
		if ok, err := s.Park(ctx, tk.ID, 0, twoAsks()); err != nil || ok {
			t.Fatalf("park twice: %v %v", ok, err)
		}
		// Answers to what is not outstanding are ignored: an unknown ID,
		// the call's own key, nothing at all.
		for _, a := range []map[string]json.RawMessage{
			{"unknown-key": json.RawMessage(`{"ignored":true}`)},
			{"first": accept("key")},
			{},
			nil,
		} {
			if r, err := s.Answer(ctx, alice, tk.ID, a); err != nil || r != nil {
				t.Fatalf("answer %v: %v %v", a, r, err)
			}
		}
		// A partial answer keeps it waiting, on the rest alone.
		c.advance(time.Second)
		if r, err := s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-first": accept("ann"), "other": accept("x")}); err != nil || r != nil {
			t.Fatalf("partial: %v %v", r, err)
		}
		got, _ = s.Get(ctx, alice, tk.ID)
		if got.Status != tasks.InputRequired || strings.Join(ids(got.Pending), ",") != "r1-second" {
			t.Fatalf("after a partial answer: %+v", got)
		}
		// Answering the answered one again changes nothing: the first
		// answer stands.
		if r, err := s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-first": accept("eve")}); err != nil || r != nil {
			t.Fatalf("answer again: %v %v", r, err)
		}
		// The last answer resumes it, with every answer under the call's
		// keys, the state and the call.
		r, err := s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-second": accept("yes")})
		if err != nil || r == nil {
			t.Fatalf("last answer: %v %v", r, err)
		}
		if r.ID != tk.ID || r.Owner != alice || r.Capability != "report.build" || r.Round != 1 || r.State != "sealed-1" ||
			string(r.Call) != `{"arguments":{"x":1}}` || len(r.Answers) != 2 ||
			string(r.Answers["first"]) != string(accept("ann")) || string(r.Answers["second"]) != string(accept("yes")) {
			t.Fatalf("resume %+v", r)
		}
		got, _ = s.Get(ctx, alice, tk.ID)
		if got.Status != tasks.Working || got.Pending != nil || got.Message != "" || got.Round != 1 {
			t.Fatalf("resumed: %+v", got)
		}
		// Once: the same answers again resume nothing.
		if r, err := s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-second": accept("yes")}); err != nil || r != nil {
			t.Fatalf("answer after the resume: %v %v", r, err)
		}
		// The resumed run asks again: round 2's IDs are new even for the
		// same keys, and a park with the old round does nothing.
		if ok, _ := s.Park(ctx, tk.ID, 0, twoAsks()); ok {
			t.Fatal("a stale run parked the task")
		}
		if ok, err := s.Park(ctx, tk.ID, 1, twoAsks()); err != nil || !ok {
			t.Fatalf("park round 2: %v %v", ok, err)
		}
		got, _ = s.Get(ctx, alice, tk.ID)
		if got.Round != 2 || strings.Join(ids(got.Pending), ",") != "r2-first,r2-second" {
			t.Fatalf("round 2: %+v", got)
		}
		// Round 1's IDs answer nothing now.
		if r, _ := s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-first": accept("a"), "r1-second": accept("b")}); r != nil {
			t.Fatalf("round 1's IDs resumed round 2: %+v", r)
		}
		// It ends: what it waited on goes with the wait.
		r, _ = s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r2-first": accept("a"), "r2-second": accept("b")})
		if r == nil || r.Round != 2 {
			t.Fatalf("round 2 resume: %+v", r)
		}
		if ended, err := s.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Completed, Payload: []byte(`{"content":[]}`)}); err != nil || !ended {
			t.Fatalf("finish: %v %v", ended, err)
		}
		if ok, _ := s.Park(ctx, tk.ID, 2, twoAsks()); ok {
			t.Fatal("an ended task parked")
		}
	})

	t.Run("AnswerOwnerOnly", func(t *testing.T) {
		s, _, c := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		s.Park(ctx, tk.ID, 0, twoAsks())
		all := map[string]json.RawMessage{"r1-first": accept("a"), "r1-second": accept("b")}
		for _, o := range []tasks.Owner{{TokenLabel: "tokens-1", UserID: "alice"}, {TokenLabel: "tokens-0", UserID: "bob"}} {
			if _, err := s.Answer(ctx, o, tk.ID, all); !errors.Is(err, tasks.ErrNotFound) {
				t.Fatalf("%+v answered alice's task: %v", o, err)
			}
		}
		if _, err := s.Answer(ctx, alice, "tk_none", all); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("answer of none: %v", err)
		}
		if got, _ := s.Get(ctx, alice, tk.ID); len(got.Pending) != 2 {
			t.Fatalf("another's answers were kept: %+v", got)
		}
		// Past its TTL a waiting task is as gone as any.
		c.advance(time.Hour)
		if _, err := s.Answer(ctx, alice, tk.ID, all); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("answer at its TTL: %v", err)
		}
	})

	t.Run("CancelWhileWaiting", func(t *testing.T) {
		s, _, _ := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		s.Park(ctx, tk.ID, 0, twoAsks())
		s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-first": accept("a")})
		got, err := s.Cancel(ctx, alice, tk.ID, "cancelled by the client")
		if err != nil || got.Status != tasks.Cancelled || got.Pending != nil {
			t.Fatalf("cancel: %+v %v", got, err)
		}
		// The last answer resumes nothing now.
		if r, err := s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-second": accept("b")}); err != nil || r != nil {
			t.Fatalf("answer after cancel: %v %v", r, err)
		}
		if got, _ := s.Get(ctx, alice, tk.ID); got.Status != tasks.Cancelled {
			t.Fatalf("after: %+v", got)
		}
	})

	t.Run("ResumeOnce", func(t *testing.T) {
		// Two replicas receive the last answer at once: one of them
		// resumes the call, the other is acknowledged with nothing to do.
		// Partial answers racing are all kept.
		s, open, c := setup(t)
		other := open(t, c)
		for i := range 10 {
			tk, _ := s.Create(ctx, newTask(), 0)
			if ok, err := s.Park(ctx, tk.ID, 0, twoAsks()); err != nil || !ok {
				t.Fatalf("park: %v %v", ok, err)
			}
			var resumed atomic.Int32
			var wg sync.WaitGroup
			for j, st := range []*tasks.Store{s, other, s, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := map[string]json.RawMessage{"r1-first": accept("a"), "r1-second": accept("b")}
					if i%2 == 1 {
						// Each answers one of the two: the set completes
						// only with both kept.
						a = map[string]json.RawMessage{[]string{"r1-first", "r1-second"}[j%2]: accept("x")}
					}
					r, err := st.Answer(ctx, alice, tk.ID, a)
					if err != nil {
						t.Error(err)
					} else if r != nil {
						resumed.Add(1)
					}
				}()
			}
			wg.Wait()
			if resumed.Load() != 1 {
				t.Fatalf("round %d: resumed %d times", i, resumed.Load())
			}
			if got, _ := other.Get(ctx, alice, tk.ID); got.Status != tasks.Working || got.Pending != nil {
				t.Fatalf("after the race: %+v", got)
			}
		}
	})

	t.Run("WaitBounds", func(t *testing.T) {
		s, _, _ := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		big := json.RawMessage(`{"message":"` + strings.Repeat("m", tasks.MaxRequestsBytes/tasks.MaxRequests) + `"}`)
		var many, heavy []tasks.Request
		for i := range tasks.MaxRequests + 1 {
			many = append(many, tasks.Request{Key: "k" + string(rune('a'+i)), Method: "elicitation/create", Params: json.RawMessage(`{}`)})
		}
		for i := range tasks.MaxRequests {
			heavy = append(heavy, tasks.Request{Key: "k" + string(rune('a'+i)), Method: "elicitation/create", Params: big})
		}
		bad := []func(*tasks.Park){
			func(p *tasks.Park) { p.Requests = nil },
			func(p *tasks.Park) { p.Requests = many },
			func(p *tasks.Park) { p.Requests = heavy },
			func(p *tasks.Park) { p.Requests[0].Key = "" },
			func(p *tasks.Park) { p.Requests[0].Key = "a b" },
			func(p *tasks.Park) { p.Requests[0].Key = strings.Repeat("k", tasks.MaxKey+1) },
			func(p *tasks.Park) { p.Requests[1].Key = p.Requests[0].Key },
			func(p *tasks.Park) { p.Requests[0].Method = "" },
			func(p *tasks.Park) { p.Requests[0].Params = json.RawMessage(`[1]`) },
			func(p *tasks.Park) { p.Requests[0].Params = json.RawMessage(`{"x":`) },
			func(p *tasks.Park) { p.State = "" },
			func(p *tasks.Park) { p.State = strings.Repeat("s", tasks.MaxStateBytes+1) },
			func(p *tasks.Park) { p.Call = nil },
			func(p *tasks.Park) { p.Call = make([]byte, tasks.MaxCallBytes+1) },
			func(p *tasks.Park) { p.Message = strings.Repeat("m", tasks.MaxMessage+1) },
		}
		for i, f := range bad {
			p := twoAsks()
			f(&p)
			if ok, err := s.Park(ctx, tk.ID, 0, p); !errors.Is(err, tasks.ErrInvalid) || ok {
				t.Errorf("park case %d: %v %v", i, ok, err)
			}
		}
		if _, err := s.Park(ctx, tk.ID, -1, twoAsks()); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("negative round: %v", err)
		}
		if got, _ := s.Get(ctx, alice, tk.ID); got.Status != tasks.Working {
			t.Fatalf("an invalid park changed it: %+v", got)
		}
		// At the bounds it parks.
		p := twoAsks()
		p.Requests = heavy[:tasks.MaxRequests-1]
		p.State = strings.Repeat("s", tasks.MaxStateBytes)
		if ok, err := s.Park(ctx, tk.ID, 0, p); err != nil || !ok {
			t.Fatalf("park at the bounds: %v %v", ok, err)
		}
		// Answers: each an object within its bound; too many bytes in all
		// are refused and nothing is kept.
		for i, a := range []json.RawMessage{
			json.RawMessage(`"accept"`),
			json.RawMessage(`{"x":`),
			json.RawMessage(`{"x":"` + strings.Repeat("a", tasks.MaxAnswerBytes) + `"}`),
			nil,
		} {
			if _, err := s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-ka": a}); !errors.Is(err, tasks.ErrInvalid) {
				t.Errorf("answer case %d: %v", i, err)
			}
		}
		near := json.RawMessage(`{"x":"` + strings.Repeat("a", tasks.MaxAnswerBytes-16) + `"}`)
		var err error
		for i := range tasks.MaxRequests - 2 {
			if _, err = s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-k" + string(rune('a'+i)): near}); err != nil {
				break
			}
		}
		if !errors.Is(err, tasks.ErrInvalid) {
			t.Fatalf("answers past their bound in all: %v", err)
		}
		// Three answers of nearly MaxAnswerBytes fit in MaxAnswersBytes; the
		// fourth does not, and is not kept.
		got, _ := s.Get(ctx, alice, tk.ID)
		if got.Status != tasks.InputRequired || len(got.Pending) != tasks.MaxRequests-1-3 {
			t.Fatalf("after the bound: %d pending, %s", len(got.Pending), got.Status)
		}
	})

	t.Run("WaitingIsNotLost", func(t *testing.T) {
		// A waiting task runs nothing: the sweep leaves it to its TTL, and
		// a resumed one is timed from its resumption, not its creation.
		s, _, c := setup(t)
		waits, _ := s.Create(ctx, newTask(), 0)
		resumed, _ := s.Create(ctx, newTask(), 0)
		s.Park(ctx, waits.ID, 0, twoAsks())
		s.Park(ctx, resumed.ID, 0, twoAsks())
		c.advance(20 * time.Minute)
		if r, _ := s.Answer(ctx, alice, resumed.ID, map[string]json.RawMessage{"r1-first": accept("a"), "r1-second": accept("b")}); r == nil {
			t.Fatal("no resume")
		}
		deleted, lost, err := s.Sweep(ctx, c.now().Add(-10*time.Minute), []byte(`{"code":-32603,"message":"lost"}`))
		if err != nil || deleted != 0 || lost != 0 {
			t.Fatalf("sweep: %d %d %v", deleted, lost, err)
		}
		c.advance(15 * time.Minute)
		_, lost, _ = s.Sweep(ctx, c.now().Add(-10*time.Minute), []byte(`{"code":-32603,"message":"lost"}`))
		if got, _ := s.Get(ctx, alice, resumed.ID); lost != 1 || got.Status != tasks.Failed {
			t.Fatalf("a resumed run never ended: %d, %+v", lost, got)
		}
		if got, _ := s.Get(ctx, alice, waits.ID); got.Status != tasks.InputRequired {
			t.Fatalf("the waiting one: %+v", got)
		}
		c.advance(time.Hour)
		if deleted, _, _ := s.Sweep(ctx, c.now(), []byte(`{"code":-32603,"message":"lost"}`)); deleted != 2 {
			t.Fatalf("expired: %d", deleted)
		}
		if _, err := s.Status(ctx, waits.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("a waiting task outlived its TTL: %v", err)
		}
	})

	t.Run("WaitingSurvivesRestart", func(t *testing.T) {
		s, open, c := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		s.Park(ctx, tk.ID, 0, twoAsks())
		s.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-first": accept("a")})
		s.Close()
		again := open(t, c)
		if got, err := again.Get(ctx, alice, tk.ID); err != nil || strings.Join(ids(got.Pending), ",") != "r1-second" {
			t.Fatalf("after reopening: %+v %v", got, err)
		}
		r, err := again.Answer(ctx, alice, tk.ID, map[string]json.RawMessage{"r1-second": accept("b")})
		if err != nil || r == nil || string(r.Answers["first"]) != string(accept("a")) {
			t.Fatalf("resume after reopening: %+v %v", r, err)
		}
	})

	t.Run("DiscardAndFollow", func(t *testing.T) {
		s, _, _ := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		if ok, err := s.Discard(ctx, tk.ID); err != nil || !ok {
			t.Fatalf("discard: %v %v", ok, err)
		}
		if _, err := s.Status(ctx, tk.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("discarded task kept: %v", err)
		}
		// One that waited, or ended, is kept.
		waited, _ := s.Create(ctx, newTask(), 0)
		s.Park(ctx, waited.ID, 0, twoAsks())
		ended, _ := s.Create(ctx, newTask(), 0)
		s.Finish(ctx, ended.ID, tasks.Outcome{Status: tasks.Cancelled})
		for _, id := range []string{waited.ID, ended.ID} {
			if ok, err := s.Discard(ctx, id); err != nil || ok {
				t.Fatalf("discarded %s: %v %v", id, ok, err)
			}
		}
		s.Answer(ctx, alice, waited.ID, map[string]json.RawMessage{"r1-first": accept("a"), "r1-second": accept("b")})
		if ok, err := s.Discard(ctx, waited.ID); err != nil || ok {
			t.Fatalf("discarded a resumed task: %v %v", ok, err)
		}
		// A resumed call held for a human follows its request.
		if ok, err := s.Follow(ctx, waited.ID, "ap_1", "waiting for a human"); err != nil || !ok {
			t.Fatalf("follow: %v %v", ok, err)
		}
		got, _ := s.Get(ctx, alice, waited.ID)
		if got.ApprovalID != "ap_1" || got.Message != "waiting for a human" || got.Status != tasks.Working {
			t.Fatalf("following: %+v", got)
		}
		if ok, _ := s.Follow(ctx, waited.ID, "ap_2", ""); ok {
			t.Fatal("followed a second request")
		}
		if ok, _ := s.Park(ctx, waited.ID, 1, twoAsks()); ok {
			t.Fatal("a task following its request parked")
		}
		for _, a := range []string{"", strings.Repeat("a", tasks.MaxField+1)} {
			if _, err := s.Follow(ctx, ended.ID, a, ""); !errors.Is(err, tasks.ErrInvalid) {
				t.Fatalf("follow %q: %v", a, err)
			}
		}
	})
}
