package pluginhost

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/internal/pluginwire"
)

var (
	callTrace  = trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	otherTrace = trace.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	callSpan   = trace.SpanID{1, 1, 1, 1, 1, 1, 1, 1}
)

func spanOf(tid trace.TraceID, n byte) *tracepb.Span {
	return &tracepb.Span{TraceId: tid[:], SpanId: []byte{n, 0, 0, 0, 0, 0, 0, 1}, Name: "s"}
}

func tracesData(spans ...*tracepb.Span) []byte {
	b, _ := proto.Marshal(&tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}}}}})
	return b
}

// TestAcceptSpans: what a plugin sends back with a call is exported only
// when the host records the call, only for spans of the call's own trace,
// at most the contract's count, and not at all past its bytes or when it
// is not OTLP; each refusal is logged.
func TestAcceptSpans(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: callTrace, SpanID: callSpan, TraceFlags: trace.FlagsSampled})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: callTrace, SpanID: callSpan})
	many := make([]*tracepb.Span, pluginwire.MaxCallSpans+5)
	for i := range many {
		many[i] = spanOf(callTrace, byte(i))
	}
	for _, tc := range []struct {
		name string
		sc   trace.SpanContext
		raw  []byte
		want int    // spans exported
		warn string // in the log
	}{
		{"the call's trace", sampled, tracesData(spanOf(callTrace, 1), spanOf(callTrace, 2)), 2, ""},
		{"another trace", sampled, tracesData(spanOf(callTrace, 1), spanOf(otherTrace, 2)), 1, "outside the trace of its call"},
		{"a short trace id", sampled, tracesData(&tracepb.Span{TraceId: []byte{1, 2, 3}, SpanId: []byte{1, 0, 0, 0, 0, 0, 0, 1}}), 0, "outside the trace of its call"},
		{"a short span id", sampled, tracesData(&tracepb.Span{TraceId: callTrace[:], SpanId: []byte{1}}), 0, "outside the trace of its call"},
		{"not recorded", unsampled, tracesData(spanOf(callTrace, 1)), 0, "does not record"},
		{"too many", sampled, tracesData(many...), pluginwire.MaxCallSpans, "more spans"},
		{"too large", sampled, make([]byte, pluginwire.MaxCallSpansBytes+1), 0, "more span bytes"},
		{"not OTLP", sampled, []byte("\xff\xff\xff"), 0, "not OTLP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log strings.Builder
			p := &Plugin{spec: Spec{Name: "p"}, log: slog.New(slog.NewTextHandler(&log, nil))}
			got := 0
			tr := &Tracing{Export: func(plugin string, spans []*tracepb.ScopeSpans) {
				if plugin != "p" {
					t.Errorf("exported as plugin %q", plugin)
				}
				for _, ss := range spans {
					got += len(ss.Spans)
				}
			}}
			p.acceptSpans(tr, tc.sc, tc.raw)
			if got != tc.want {
				t.Errorf("%d spans exported; want %d", got, tc.want)
			}
			if tc.warn != "" && !strings.Contains(log.String(), tc.warn) {
				t.Errorf("log %q; want it to say %q", log.String(), tc.warn)
			}
			if tc.warn == "" && log.Len() > 0 {
				t.Errorf("log %q; want nothing", log.String())
			}
		})
	}
}

// TestNestedParent: a nested call hangs from the plugin's span that made
// it when that span is in the call's trace, from the call's own span when
// the plugin names another trace or none, and from nothing when the call
// is not traced.
func TestNestedParent(t *testing.T) {
	call := inflightCall{span: trace.NewSpanContext(trace.SpanContextConfig{TraceID: callTrace, SpanID: callSpan, TraceFlags: trace.FlagsSampled})}
	pluginSpan := "00-" + callTrace.String() + "-0202020202020202-01"
	foreign := "00-" + otherTrace.String() + "-0202020202020202-01"
	for _, tc := range []struct {
		name string
		c    inflightCall
		tc   map[string]string
		want trace.SpanID
	}{
		{"the plugin's span", call, map[string]string{"traceparent": pluginSpan}, trace.SpanID{2, 2, 2, 2, 2, 2, 2, 2}},
		{"another trace", call, map[string]string{"traceparent": foreign}, callSpan},
		{"none", call, nil, callSpan},
		{"untraced call", inflightCall{}, map[string]string{"traceparent": pluginSpan}, trace.SpanID{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := trace.SpanContextFromContext(nestedParent(context.Background(), tc.c, tc.tc))
			if sc.SpanID() != tc.want || (sc.IsValid() && sc.TraceID() != callTrace) {
				t.Errorf("parent %s in %s; want %s in %s", sc.SpanID(), sc.TraceID(), tc.want, callTrace)
			}
		})
	}
}
