package pluginwire

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/capgate/capgate/internal/dispatch"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// noisyPlugin answers every call over a real Calls stream after sending
// notices for it, some of which the host must drop: a malformed one, one
// below the level asked for, one for a call that does not exist, and one
// after the result.
type noisyPlugin struct {
	capgatev1.UnimplementedPluginServiceServer
	asked chan *capgatev1.Notices
}

func (p *noisyPlugin) Calls(stream capgatev1.PluginService_CallsServer) error {
	var mu sync.Mutex
	send := func(r *capgatev1.CallsResponse) {
		mu.Lock()
		defer mu.Unlock()
		_ = stream.Send(r)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		inv := req.GetInvoke()
		if inv == nil {
			continue
		}
		if p.asked != nil {
			p.asked <- inv.Notices
		}
		wg.Add(1)
		go func(id uint64, name string) {
			defer wg.Done()
			progress := func(v float64, msg string) *capgatev1.CallsResponse {
				return &capgatev1.CallsResponse{Id: id, Notice: &capgatev1.CallsResponse_Progress{Progress: &capgatev1.Progress{Progress: v, Total: 2, Message: msg}}}
			}
			logAt := func(l capgatev1.LogLevel, data string) *capgatev1.CallsResponse {
				return &capgatev1.CallsResponse{Id: id, Notice: &capgatev1.CallsResponse_Log{Log: &capgatev1.LogMessage{Level: l, Data: []byte(data)}}}
			}
			send(progress(1, name))
			send(progress(math.NaN(), name))                       // malformed
			send(logAt(capgatev1.LogLevel_LOG_LEVEL_DEBUG, `"d"`)) // below the level asked
			send(logAt(capgatev1.LogLevel_LOG_LEVEL_ERROR, `{"name":"`+name+`"}`))
			send(logAt(capgatev1.LogLevel_LOG_LEVEL_ERROR, `not json`))
			send(logAt(99, `"x"`))
			time.Sleep(time.Millisecond)
			send(progress(2, name))
			send(&capgatev1.CallsResponse{Id: id, Result: &capgatev1.CallsResponse_Invoke{Invoke: &capgatev1.InvokeResponse{Result: []byte(`{}`)}}})
			send(progress(3, name+" late"))
		}(req.Id, inv.Capability)
		// A notice for a call id never sent.
		send(&capgatev1.CallsResponse{Id: 1 << 60, Notice: &capgatev1.CallsResponse_Progress{Progress: &capgatev1.Progress{Progress: 1}}})
	}
}

func dialNoisy(t *testing.T, p *noisyPlugin) *CallStream {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	capgatev1.RegisterPluginServiceServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	}), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	cs, err := OpenCalls(context.Background(), capgatev1.NewPluginServiceClient(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cs.Close)
	return cs
}

type sink struct {
	wants dispatch.Wants
	mu    sync.Mutex
	got   []dispatch.Notice
}

func (s *sink) Wants() dispatch.Wants { return s.wants }
func (s *sink) Notify(n dispatch.Notice) {
	s.mu.Lock()
	s.got = append(s.got, n)
	s.mu.Unlock()
}

func TestNoticesReachTheirCall(t *testing.T) {
	cs := dialNoisy(t, &noisyPlugin{})
	const calls = 16
	sinks := make([]*sink, calls)
	var wg sync.WaitGroup
	for i := range calls {
		sinks[i] = &sink{wants: dispatch.Wants{Progress: true, LogLevel: dispatch.LogInfo}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := dispatch.WithNotices(context.Background(), sinks[i])
			if _, err := cs.Invoke(ctx, "c", dispatch.Request{Capability: fmt.Sprintf("cap%d", i), Args: []byte(`{}`)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(20 * time.Millisecond) // let late notices arrive, to be dropped
	for i, s := range sinks {
		name := fmt.Sprintf("cap%d", i)
		s.mu.Lock()
		got := s.got
		s.mu.Unlock()
		if len(got) != 3 {
			t.Fatalf("call %s heard %d notices, want 3: %+v", name, len(got), got)
		}
		if got[0].Progress == nil || got[0].Progress.Message != name || got[0].Progress.Progress != 1 {
			t.Fatalf("call %s: first notice %+v", name, got[0])
		}
		var data struct{ Name string }
		if got[1].Log == nil || got[1].Log.Level != dispatch.LogError || json.Unmarshal(got[1].Log.Data, &data) != nil || data.Name != name {
			t.Fatalf("call %s: second notice %+v", name, got[1])
		}
		if got[2].Progress == nil || got[2].Progress.Progress != 2 || got[2].Progress.Message != name {
			t.Fatalf("call %s: third notice %+v", name, got[2])
		}
	}
}

func TestNoticesAskedOnlyWhenWanted(t *testing.T) {
	p := &noisyPlugin{asked: make(chan *capgatev1.Notices, 4)}
	cs := dialNoisy(t, p)
	// No sink: the plugin is asked for nothing.
	if _, err := cs.Invoke(context.Background(), "c", dispatch.Request{Capability: "x", Args: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if n := <-p.asked; n != nil {
		t.Fatalf("a call without a sink asked for %v", n)
	}
	// A sink that wants nothing asks for nothing either.
	ctx := dispatch.WithNotices(context.Background(), &sink{})
	if _, err := cs.Invoke(ctx, "c", dispatch.Request{Capability: "x", Args: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if n := <-p.asked; n != nil {
		t.Fatalf("a sink wanting nothing asked for %v", n)
	}
	// The ownership step alone asks for nothing, whatever the caller wants.
	s := &sink{wants: dispatch.Wants{Progress: true, LogLevel: dispatch.LogWarning}}
	ctx = dispatch.WithNotices(context.Background(), s)
	_ = cs.CheckOwner(ctx, "c", dispatch.Request{Capability: "x", Args: []byte(`{}`)})
	if n := <-p.asked; n != nil {
		t.Fatalf("an ownership check asked for %v", n)
	}
	if _, err := cs.Invoke(ctx, "c", dispatch.Request{Capability: "x", Args: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if n := <-p.asked; !n.GetProgress() || n.GetLogLevel() != capgatev1.LogLevel_LOG_LEVEL_WARNING {
		t.Fatalf("asked for %v, want progress and warning", n)
	}
}
