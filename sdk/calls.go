package sdk

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Calls serves the host's multiplexed call stream: each request runs
// concurrently, answered on the same stream under its id.
func (s *server) Calls(stream capgatev1.PluginService_CallsServer) error {
	if err := s.ready(); err != nil {
		return err
	}
	m := &callMux{stream: stream, running: map[uint64]context.CancelFunc{}}
	defer m.cancelAll()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, ok := req.Call.(*capgatev1.CallsRequest_Cancel); ok {
			m.cancel(req.Id)
			continue
		}
		var ctx context.Context
		var cancel context.CancelFunc
		if req.DeadlineUnixNano > 0 {
			ctx, cancel = context.WithDeadline(stream.Context(), time.Unix(0, req.DeadlineUnixNano))
		} else {
			ctx, cancel = context.WithCancel(stream.Context())
		}
		m.start(req.Id, cancel)
		s.workers.run(func() {
			resp := s.serveCall(ctx, req, m.send)
			m.finish(req.Id)
			m.send(resp)
		})
	}
}

// serveCall runs one call of the stream. A call the host traces runs in a
// span of its own, under the host's, and the spans it recorded go back with
// its answer.
//
// A call whose request asks for notices sends them on the stream with
// send while it runs; none is sent once its answer is ready.
func (s *server) serveCall(ctx context.Context, req *capgatev1.CallsRequest, send func(*capgatev1.CallsResponse)) *capgatev1.CallsResponse {
	out := &capgatev1.CallsResponse{Id: req.Id}
	var err error
	switch c := req.Call.(type) {
	case *capgatev1.CallsRequest_Invoke:
		ctx, span := s.tracing.start(ctx, c.Invoke)
		if span != nil {
			defer s.tracing.finish(span, out, s.p.logger.Warn)
		}
		var r *capgatev1.InvokeResponse
		n := newNotifier(req.Id, c.Invoke.Notices, c.Invoke.Capability, send)
		r, err = s.invoke(ctx, c.Invoke, n)
		if sent, dropped := n.finish(); dropped > 0 {
			s.p.logger.Debug("call notices dropped over their bounds", "capability", c.Invoke.Capability,
				"call_id", c.Invoke.CallId, "sent", sent, "dropped", dropped)
		}
		if err == nil {
			out.Result = &capgatev1.CallsResponse_Invoke{Invoke: r}
		}
	default:
		err = status.Errorf(codes.InvalidArgument, "call %d carries no request", req.Id)
	}
	if err != nil {
		st := status.Convert(err)
		out.Result = &capgatev1.CallsResponse_Failure{Failure: &capgatev1.CallFailure{Code: uint32(st.Code()), Message: st.Message()}}
	}
	return out
}

// callMux tracks the calls in flight on one stream.
type callMux struct {
	stream capgatev1.PluginService_CallsServer

	sendMu sync.Mutex // a gRPC stream allows one sender at a time

	mu      sync.Mutex
	running map[uint64]context.CancelFunc
}

func (m *callMux) start(id uint64, cancel context.CancelFunc) {
	m.mu.Lock()
	m.running[id] = cancel
	m.mu.Unlock()
}

func (m *callMux) finish(id uint64) {
	m.mu.Lock()
	cancel := m.running[id]
	delete(m.running, id)
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (m *callMux) cancel(id uint64) {
	m.mu.Lock()
	cancel := m.running[id]
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (m *callMux) cancelAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cancel := range m.running {
		cancel()
	}
}

// send writes one response. A failed send means the stream is gone; the
// host then fails the call itself, so the error has nowhere to go.
func (m *callMux) send(resp *capgatev1.CallsResponse) {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	_ = m.stream.Send(resp)
}

// workerPool runs calls on goroutines that live between calls: their stacks
// stay grown, where a fresh goroutine per call would grow (copy) its stack
// again on every call that goes deep, as a database driver does. When every
// worker is busy a call gets a goroutine of its own rather than waiting.
type workerPool struct {
	once sync.Once
	jobs chan func()
}

func (p *workerPool) run(job func()) {
	p.once.Do(func() {
		p.jobs = make(chan func())
		for range streamWorkers {
			go func() {
				for j := range p.jobs {
					j()
				}
			}()
		}
	})
	select {
	case p.jobs <- job:
	default:
		go job()
	}
}
