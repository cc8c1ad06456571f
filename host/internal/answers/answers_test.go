package answers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/host/internal/events/eventstest"
)

var (
	alice = answers.Caller{Token: "alice-token", User: "alice"}
	bob   = answers.Caller{Token: "bob-token", User: "bob"}
	// aliceElsewhere is alice's user behind another token: not the caller.
	aliceElsewhere = answers.Caller{Token: "other-token", User: "alice"}
	accepted       = answers.Answer{Result: json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func relay(t *testing.T, o answers.Options) *answers.Relay {
	t.Helper()
	r, err := answers.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// got reads the answer that must have arrived.
func got(t *testing.T, ch <-chan answers.Answer) answers.Answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	default:
		t.Fatal("no answer arrived")
		return answers.Answer{}
	}
}

func none(t *testing.T, ch <-chan answers.Answer) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("an answer arrived: %+v", a)
	default:
	}
}

func TestDeliverHere(t *testing.T) {
	r := relay(t, answers.Options{})
	id, ch, done := r.Await(alice)
	defer done()
	if !answers.IsID(id) || !strings.Contains(id, r.Replica()) {
		t.Fatalf("id %q: not one of a Relay's, or not naming replica %s", id, r.Replica())
	}
	for _, c := range []answers.Caller{bob, aliceElsewhere} {
		if err := r.Deliver(ctx(t), c, id, accepted); !errors.Is(err, answers.ErrNoCall) {
			t.Fatalf("%+v answered alice's request: %v, want ErrNoCall", c, err)
		}
	}
	none(t, ch)
	if err := r.Deliver(ctx(t), alice, id, accepted); err != nil {
		t.Fatal(err)
	}
	if a := got(t, ch); string(a.Result) != string(accepted.Result) {
		t.Fatalf("got %s", a.Result)
	}
	if err := r.Deliver(ctx(t), alice, id, accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("a second answer: %v, want ErrNoCall (taken once)", err)
	}
	if n := r.Waiting(); n != 0 {
		t.Fatalf("%d still waiting after the answer", n)
	}
}

func TestDeliverAfterDone(t *testing.T) {
	r := relay(t, answers.Options{})
	id, ch, done := r.Await(alice)
	done()
	if err := r.Deliver(ctx(t), alice, id, accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("an answer after the call stopped waiting: %v, want ErrNoCall", err)
	}
	none(t, ch)
}

func TestDeliverRefusesWhatIsNotAnAnswer(t *testing.T) {
	r := relay(t, answers.Options{})
	id, ch, done := r.Await(alice)
	defer done()
	for name, a := range map[string]answers.Answer{
		"nothing":      {},
		"both":         {Result: json.RawMessage(`{}`), Error: &answers.Error{Code: -32601, Message: "x"}},
		"not JSON":     {Result: json.RawMessage(`{"a":`)},
		"too large":    {Result: json.RawMessage(`"` + strings.Repeat("x", answers.MaxAnswerBytes) + `"`)},
		"long message": {Error: &answers.Error{Code: -1, Message: strings.Repeat("x", answers.MaxErrorMessage+1)}},
	} {
		t.Run(name, func(t *testing.T) {
			err := r.Deliver(ctx(t), alice, id, a)
			if err == nil || errors.Is(err, answers.ErrNoCall) {
				t.Fatalf("Deliver: %v, want an error saying what is wrong", err)
			}
		})
	}
	none(t, ch)
	// The call still waits: a sound answer is taken.
	if err := r.Deliver(ctx(t), alice, id, answers.Answer{Error: &answers.Error{Code: -32601, Message: "Method not found"}}); err != nil {
		t.Fatal(err)
	}
	if a := got(t, ch); a.Error == nil || a.Error.Code != -32601 {
		t.Fatalf("got %+v", a)
	}
}

func TestIsID(t *testing.T) {
	r := relay(t, answers.Options{})
	id, _, done := r.Await(alice)
	done()
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{id, true},
		{"", false},
		{"1", false},
		{"capgate-ask-", false},
		{"capgate-ask-abc", false},
		{"capgate-ask-abc-", false},
		{"capgate-ask--abc", false},
		{"capgate-ask-ab.c-def", false}, // would be two subject tokens
		{"capgate-ask-abc-d*f", false},
		{"capgate-ask-ABC-def", false},
		{"capgate-ask-abc-def-ghi", false},
		{"capgate-ask-" + strings.Repeat("a", 33) + "-abc", false},
	} {
		if got := answers.IsID(tc.id); got != tc.want {
			t.Errorf("IsID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
	if err := r.Deliver(ctx(t), alice, "42", accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("an id no Relay hands out: %v, want ErrNoCall", err)
	}
}

func TestAloneKnowsNoOtherReplica(t *testing.T) {
	a := relay(t, answers.Options{})
	b := relay(t, answers.Options{})
	id, ch, done := a.Await(alice)
	defer done()
	if err := b.Deliver(ctx(t), alice, id, accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("a relay without a connection delivered to another: %v", err)
	}
	none(t, ch)
}

// connect opens a connection of its own to the test's NATS server, as each
// replica has.
func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// uniqueSubject keeps a test's replicas apart from every other run's on a
// shared server.
func uniqueSubject() string { return fmt.Sprintf("capgate_test.answers.t%d", time.Now().UnixNano()) }

func TestDeliverToAnotherReplica(t *testing.T) {
	url := eventstest.NATSURL(t)
	subject := uniqueSubject()
	a := relay(t, answers.Options{Conn: connect(t, url), Subject: subject})
	b := relay(t, answers.Options{Conn: connect(t, url), Subject: subject})
	other := relay(t, answers.Options{Conn: connect(t, url), Subject: subject + "_other"})

	id, ch, done := a.Await(alice)
	defer done()
	if err := b.Deliver(ctx(t), bob, id, accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("bob answered alice's request through another replica: %v", err)
	}
	if err := other.Deliver(ctx(t), alice, id, accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("another deployment's replica delivered: %v", err)
	}
	none(t, ch)
	if err := b.Deliver(ctx(t), alice, id, accepted); err != nil {
		t.Fatal(err)
	}
	if a := got(t, ch); string(a.Result) != string(accepted.Result) {
		t.Fatalf("got %s", a.Result)
	}
	if err := b.Deliver(ctx(t), alice, id, accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("a second answer: %v, want ErrNoCall", err)
	}

	// A replica gone: nobody there takes the answer, and the sender
	// learns it at once.
	id2, _, done2 := a.Await(alice)
	defer done2()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Deliver(ctx(t), alice, id2, accepted); !errors.Is(err, answers.ErrNoCall) {
		t.Fatalf("an answer for a closed replica: %v, want ErrNoCall", err)
	}
}

func TestHandoverOfGarbage(t *testing.T) {
	url := eventstest.NATSURL(t)
	subject := uniqueSubject()
	var logs bytes.Buffer
	var mu sync.Mutex
	a := relay(t, answers.Options{Conn: connect(t, url), Subject: subject, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	id, ch, done := a.Await(alice)
	defer done()
	nc := connect(t, url)
	for _, data := range []string{"", "{", `{"id":"` + id + `","token":"alice-token","user":"alice","answer":{}}`, strings.Repeat("x", 300<<10)} {
		reply, err := nc.Request(subject+"."+a.Replica(), []byte(data), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(reply.Data) != "no call" {
			t.Fatalf("handover %.40q: reply %q, want no call", data, reply.Data)
		}
	}
	none(t, ch)
	mu.Lock()
	defer mu.Unlock()
	if got := logs.String(); strings.Count(got, "an unreadable handover was dropped") != 3 || !strings.Contains(got, `a handover over its bound was dropped" bytes=307200`) {
		t.Fatalf("logged:\n%s", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
