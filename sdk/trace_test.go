package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
)

type WorkIn struct {
	// Spans is how many spans of its own the handler records, nested.
	Spans int    `json:"spans" capgate:"minimum=0,maximum=1000"`
	Fail  string `json:"fail,omitempty" capgate:"maxLength=16"`
}

type WorkOut struct {
	Done bool `json:"done"`
}

// tracedPlugin has one capability whose handler records spans the way an
// author would, from the context it is given and nothing else.
func tracedPlugin() *sdk.Plugin {
	p := sdk.New("traced", "1.0.0")
	sdk.Add(p, sdk.Tool[WorkIn, WorkOut]{
		Name: "traced.work", Kind: sdk.Read, Permission: "traced.use",
		Handler: func(ctx context.Context, _ sdk.Call, in WorkIn) (WorkOut, error) {
			tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer("author")
			for i := range in.Spans {
				var span trace.Span
				ctx, span = tracer.Start(ctx, fmt.Sprintf("author.step-%d", i))
				defer span.End()
			}
			switch in.Fail {
			case "tool":
				return WorkOut{}, sdk.NotFound("nothing here")
			case "internal":
				return WorkOut{}, fmt.Errorf("the disk is on fire")
			}
			return WorkOut{Done: true}, nil
		},
	})
	return p
}

// callStream serves p over a real gRPC connection, configured as the host
// configures it, and opens the host's end of its call stream.
func callStream(t *testing.T, p *sdk.Plugin) *pluginwire.CallStream {
	t.Helper()
	srv := sdkserver.NewServer(p)
	conn, _ := plugin.TestPluginGRPCConn(t, false, pluginwire.PluginSet(srv))
	raw, err := conn.Dispense(capgatev1.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	wc := raw.(*pluginwire.Client)
	ctx := context.Background()
	if _, err := wc.Configure(ctx, &capgatev1.ConfigureRequest{ConfigJson: []byte("{}"), DataDir: t.TempDir(), MaxResultBytes: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	calls, err := pluginwire.OpenCalls(ctx, wc.PluginServiceClient)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		calls.Close()
		_ = conn.Close()
		_ = srv.Close()
	})
	return calls
}

func work(in WorkIn) dispatch.Request {
	args, _ := json.Marshal(in)
	return dispatch.Request{Capability: "traced.work", Args: args,
		Principal: dispatch.Principal{Role: "r", Scope: dispatch.ScopeRead}}
}

// parent is a W3C trace context as a host sends it.
func parent(traceID trace.TraceID, spanID trace.SpanID, sampled bool) map[string]string {
	flags := "00"
	if sampled {
		flags = "01"
	}
	return map[string]string{"traceparent": "00-" + traceID.String() + "-" + spanID.String() + "-" + flags}
}

func decodeSpans(t *testing.T, b []byte) []*tracepb.Span {
	t.Helper()
	if len(b) == 0 {
		return nil
	}
	var td tracepb.TracesData
	if err := proto.Unmarshal(b, &td); err != nil {
		t.Fatalf("the spans are not an OTLP TracesData message: %v", err)
	}
	var out []*tracepb.Span
	for _, rs := range td.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			out = append(out, ss.Spans...)
		}
	}
	return out
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func ids(n byte) (trace.TraceID, trace.SpanID) {
	return trace.TraceID{0x4b, 0xf9, 0x2f, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, trace.SpanID{0, 0xf0, 0x67, n, 0xa, 0xb, 0xc, 0xd}
}

// TestCallSpansContinueTheHostsTrace: a call sent with a sampled trace
// context runs in a server span whose parent is the host's span, the
// author's spans nest under it through the context alone, and all of them
// come back with the answer, in the host's trace.
func TestCallSpansContinueTheHostsTrace(t *testing.T) {
	calls := callStream(t, tracedPlugin())
	tid, sid := ids(1)
	res, raw, err := calls.InvokeTraced(context.Background(), "c1", work(WorkIn{Spans: 2}), parent(tid, sid, true))
	if err != nil || string(res) != `{"done":true}` {
		t.Fatalf("traced call = %s, %v", res, err)
	}
	spans := decodeSpans(t, raw)
	if len(spans) != 3 {
		t.Fatalf("got %d spans; want the call's and the author's two", len(spans))
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		if trace.TraceID(s.TraceId) != tid {
			t.Errorf("span %s is in trace %x; want the host's %s", s.Name, s.TraceId, tid)
		}
		byName[s.Name] = s
	}
	call, outer, inner := byName["execute_tool traced.work"], byName["author.step-0"], byName["author.step-1"]
	if call == nil || outer == nil || inner == nil {
		t.Fatalf("spans %v; want execute_tool traced.work, author.step-0, author.step-1", byName)
	}
	if spans[0] != call {
		t.Errorf("first span %q; the call's own comes first", spans[0].Name)
	}
	if trace.SpanID(call.ParentSpanId) != sid || call.Flags&uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) == 0 {
		t.Errorf("call span's parent %x (flags %x); want the host's span %s, remote", call.ParentSpanId, call.Flags, sid)
	}
	if call.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("call span kind %v; want server", call.Kind)
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "traced.work", "capgate.call_id": "c1", "error.type": ""} {
		if got := attr(call, k); got != want {
			t.Errorf("call span %s = %q; want %q", k, got, want)
		}
	}
	if string(outer.ParentSpanId) != string(call.SpanId) || string(inner.ParentSpanId) != string(outer.SpanId) {
		t.Errorf("the author's spans do not nest under the call's: %x→%x, %x→%x", outer.ParentSpanId, call.SpanId, inner.ParentSpanId, outer.SpanId)
	}
}

// TestCallSpansOnlyUnderTheHostsSampledTrace: no trace context, or one the
// host did not sample, records nothing; the call runs the same.
func TestCallSpansOnlyUnderTheHostsSampledTrace(t *testing.T) {
	calls := callStream(t, tracedPlugin())
	tid, sid := ids(2)
	for name, tc := range map[string]map[string]string{
		"none":        nil,
		"not sampled": parent(tid, sid, false),
		"malformed":   {"traceparent": "00-zz-yy-01"},
	} {
		t.Run(name, func(t *testing.T) {
			res, raw, err := calls.InvokeTraced(context.Background(), "c2", work(WorkIn{Spans: 3}), tc)
			if err != nil || string(res) != `{"done":true}` {
				t.Fatalf("call = %s, %v", res, err)
			}
			if len(raw) != 0 {
				t.Errorf("%d bytes of spans; want none", len(raw))
			}
		})
	}
}

// TestCallSpansSayHowTheCallEnded: a tool error and an internal failure
// mark the call's span as failed, with the kind of failure and never the
// handler's own text; the spans come back with a failure too.
func TestCallSpansSayHowTheCallEnded(t *testing.T) {
	calls := callStream(t, tracedPlugin())
	tid, sid := ids(3)
	for fail, want := range map[string]string{"tool": "tool_error", "internal": "Internal"} {
		t.Run(fail, func(t *testing.T) {
			_, raw, err := calls.InvokeTraced(context.Background(), "c3", work(WorkIn{Spans: 1, Fail: fail}), parent(tid, sid, true))
			if err == nil {
				t.Fatal("the call succeeded")
			}
			spans := decodeSpans(t, raw)
			if len(spans) != 2 {
				t.Fatalf("%d spans; want 2", len(spans))
			}
			call := spans[0]
			if got := attr(call, "error.type"); got != want {
				t.Errorf("error.type %q; want %q", got, want)
			}
			if call.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || call.Status.GetMessage() != "" {
				t.Errorf("status %v; want an error without the handler's text", call.Status)
			}
		})
	}
}

// TestCallSpansAreBounded: a handler that records far more spans than a
// call may send sends at most the bound, in at most the bytes allowed, and
// keeps the call's own span, which the rest hang from.
func TestCallSpansAreBounded(t *testing.T) {
	calls := callStream(t, tracedPlugin())
	tid, sid := ids(4)
	_, raw, err := calls.InvokeTraced(context.Background(), "c4", work(WorkIn{Spans: 1000}), parent(tid, sid, true))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > pluginwire.MaxCallSpansBytes {
		t.Errorf("%d bytes of spans; the bound is %d", len(raw), pluginwire.MaxCallSpansBytes)
	}
	spans := decodeSpans(t, raw)
	if len(spans) == 0 || len(spans) > pluginwire.MaxCallSpans {
		t.Fatalf("%d spans; want 1 to %d", len(spans), pluginwire.MaxCallSpans)
	}
	if spans[0].Name != "execute_tool traced.work" {
		t.Errorf("first span %q; want the call's own", spans[0].Name)
	}
}

// TestConcurrentCallsKeepTheirOwnSpans: calls of different traces served at
// once each send back their own spans, and only those.
func TestConcurrentCallsKeepTheirOwnSpans(t *testing.T) {
	calls := callStream(t, tracedPlugin())
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			tid, sid := ids(byte(16 + i))
			_, raw, err := calls.InvokeTraced(context.Background(), fmt.Sprint("c", i), work(WorkIn{Spans: i % 4}), parent(tid, sid, true))
			if err != nil {
				t.Error(err)
				return
			}
			spans := decodeSpans(t, raw)
			if len(spans) != 1+i%4 {
				t.Errorf("call %d: %d spans; want %d", i, len(spans), 1+i%4)
			}
			for _, s := range spans {
				if trace.TraceID(s.TraceId) != tid {
					t.Errorf("call %d got span %s of trace %x", i, s.Name, s.TraceId)
				}
			}
		})
	}
	wg.Wait()
}
