package pluginwire

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/dispatch"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// CallStream multiplexes calls over a plugin's Calls stream: one message
// each way per call instead of a gRPC stream's setup and teardown.
type CallStream struct {
	stream capgatev1.PluginService_CallsClient
	cancel context.CancelFunc

	sendMu sync.Mutex // a gRPC stream allows one sender at a time

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*pendingCall
	done    chan struct{} // closed when the stream has failed
	err     error         // why, once done is closed
}

// OpenCalls opens the stream. ctx bounds its whole life.
func OpenCalls(ctx context.Context, rpc capgatev1.PluginServiceClient) (*CallStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := rpc.Calls(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	c := &CallStream{stream: stream, cancel: cancel, pending: map[uint64]*pendingCall{}, done: make(chan struct{})}
	go c.receive()
	return c, nil
}

// receive hands each response to its waiting call until the stream ends,
// then fails every call still waiting.
func (c *CallStream) receive() {
	for {
		resp, err := c.stream.Recv()
		if err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("plugin call stream closed: %s", StatusMessage(err))
			close(c.done)
			c.mu.Unlock()
			return
		}
		if resp.Notice != nil && resp.Result == nil {
			// The call still runs: a notice for its caller. One for a
			// call that has answered, or that was never sent, has no one
			// to reach.
			c.mu.Lock()
			pc := c.pending[resp.Id]
			c.mu.Unlock()
			if pc != nil {
				pc.notify(resp)
			}
			continue
		}
		c.mu.Lock()
		pc := c.pending[resp.Id]
		delete(c.pending, resp.Id)
		c.mu.Unlock()
		if pc != nil {
			pc.ch <- resp // buffered: never blocks the receiver
		}
	}
}

// pendingCall is a call waiting for its answer.
type pendingCall struct {
	ch chan *capgatev1.CallsResponse
	// notices receives the call's notices; nil when its caller wants none.
	// Only the receiving goroutine uses it and notified.
	notices  dispatch.Notices
	wants    dispatch.Wants
	notified int
}

// ErrNotSent wraps the failure of a call that never reached the plugin:
// the stream had failed before it was sent, so nothing ran.
var ErrNotSent = errors.New("the call was not sent")

// call sends req and waits for its response, for ctx to end, or for the
// stream to fail. An abandoned call is cancelled in the plugin. A response
// carrying a failure is returned with it, as its error: the spans it
// carries are the call's all the same.
func (c *CallStream) call(ctx context.Context, req *capgatev1.CallsRequest, notices dispatch.Notices) (*capgatev1.CallsResponse, error) {
	ch := make(chan *capgatev1.CallsResponse, 1)
	pc := &pendingCall{ch: ch}
	if notices != nil {
		pc.notices, pc.wants = notices, notices.Wants()
	}
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrNotSent, c.err)
	default:
	}
	c.next++
	req.Id = c.next
	c.pending[req.Id] = pc
	c.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = d.UnixNano()
	}

	if err := c.send(req); err != nil {
		c.forget(req.Id)
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	select {
	case resp := <-ch:
		if f := resp.GetFailure(); f != nil {
			return resp, status.Error(codes.Code(f.Code), f.Message)
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.Id)
		_ = c.send(&capgatev1.CallsRequest{Id: req.Id, Call: &capgatev1.CallsRequest_Cancel{Cancel: &capgatev1.CancelCall{}}})
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.err
	}
}

func (c *CallStream) send(req *capgatev1.CallsRequest) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := c.stream.Send(req); err != nil {
		// Send reports io.EOF for a broken stream; Recv has the cause.
		<-c.done
		return c.err
	}
	return nil
}

func (c *CallStream) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Ended reports whether the stream has failed.
func (c *CallStream) Ended() bool {
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Failure is why the stream failed, once it has.
func (c *CallStream) Failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the stream; calls still waiting fail.
func (c *CallStream) Close() {
	c.sendMu.Lock()
	_ = c.stream.CloseSend()
	c.sendMu.Unlock()
	c.cancel()
}

// Done is closed when the stream has failed.
func (c *CallStream) Done() <-chan struct{} { return c.done }
