package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/internal/dispatch"
)

// Tracing makes the adapter trace the requests it answers with
// OpenTelemetry, after the conventions for MCP servers: one server span per
// JSON-RPC request, named "{mcp.method.name} {tool}", whose parent is the
// W3C trace context in the request's params._meta (traceparent,
// tracestate) or, without one, in the HTTP request's headers.
type Tracing struct {
	// Tracer starts the requests' spans.
	Tracer trace.Tracer
	// Invoke, when set, stands in for the dispatcher's Invoke on every
	// call the adapter puts to the gate, with the request's span in ctx:
	// the host wraps the gate's decision in a span of its own. It must
	// call the adapter's dispatcher.
	Invoke func(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error)
}

// w3c is the propagation the adapter reads, from _meta and from headers.
var w3c = propagation.TraceContext{}

// W3C trace context values over these lengths are no trace context a
// client sends (a traceparent is 55 bytes, a tracestate at most 512):
// they are ignored unread.
const (
	maxTraceparent = 128
	maxTracestate  = 1024
)

// metaCarrier reads the W3C trace context of a request's _meta.
type metaCarrier struct{ traceparent, tracestate string }

func (m metaCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return m.traceparent
	case "tracestate":
		return m.tracestate
	}
	return ""
}

func (metaCarrier) Set(string, string) {}
func (metaCarrier) Keys() []string     { return []string{"traceparent", "tracestate"} }

// metaParent is the trace context of the request's _meta, when it carries
// a valid one.
func metaParent(m *message) trace.SpanContext {
	var (
		ps params
		rm requestMeta
	)
	if !parseParams(m.params, &ps) || len(ps.meta) == 0 || !parseMeta(ps.meta, &rm) ||
		!isString(rm.traceparent) || len(rm.traceparent) > maxTraceparent || len(rm.tracestate) > maxTracestate {
		return trace.SpanContext{}
	}
	var mc metaCarrier
	mc.traceparent, _ = decodeString(rm.traceparent)
	if isString(rm.tracestate) {
		mc.tracestate, _ = decodeString(rm.tracestate)
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), mc))
}

// startSpan starts request m's span in c.ctx and returns the context the
// request runs in. The _meta's trace context is the parent, with the
// transport's (the headers', already in c.ctx) linked; without one, the
// transport's is the parent.
func (c *call) startSpan(m *message) (context.Context, trace.Span) {
	meth := lookupMethod(m.method)
	name := methodNames[meth]
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs,
		attribute.String("mcp.method.name", name),
		attribute.String("mcp.protocol.version", c.ver.String()),
		attribute.String("network.transport", "tcp"),
		attribute.String("network.protocol.name", "http"),
	)
	if c.r.ProtoMajor == 2 {
		attrs = append(attrs, attribute.String("network.protocol.version", "2"))
	} else {
		attrs = append(attrs, attribute.String("network.protocol.version", strconv.Itoa(c.r.ProtoMajor)+"."+strconv.Itoa(c.r.ProtoMinor)))
	}
	if host, port, err := net.SplitHostPort(c.r.RemoteAddr); err == nil {
		attrs = append(attrs, attribute.String("client.address", host))
		if n, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("client.port", n))
		}
	}
	if id, ok := spanRequestID(m.id); ok {
		attrs = append(attrs, attribute.String("jsonrpc.request.id", id))
	}
	var ps params
	if parseParams(m.params, &ps) {
		switch meth {
		case mToolsCall:
			attrs = append(attrs, attribute.String("gen_ai.operation.name", "execute_tool"))
			// Only a registered name: the span's name is low in
			// cardinality, and a caller's made-up name is not kept.
			if isString(ps.name) {
				if e, ok := c.h.reg.Lookup(string(ps.name[1 : len(ps.name)-1])); ok {
					name += " " + e.Name
					attrs = append(attrs, attribute.String("gen_ai.tool.name", e.Name))
				}
			}
		case mResourcesRead:
			if uri, ok := decodeString(ps.uri); ok && isString(ps.uri) {
				attrs = append(attrs, attribute.String("mcp.resource.uri", uri))
			}
		}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	ctx := c.ctx
	if sc := metaParent(m); sc.IsValid() {
		if transport := trace.SpanContextFromContext(ctx); transport.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: transport}))
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return c.h.tracing.Tracer.Start(ctx, name, opts...)
}

// endSpan ends request m's span with how it was answered in resp.
func (c *call) endSpan(span trace.Span, m *message, resp []byte) {
	if et := errorType(resp); et != "" {
		span.SetAttributes(attribute.String("error.type", et))
		msg := ""
		if _, err := strconv.Atoi(et); err == nil {
			span.SetAttributes(attribute.String("rpc.response.status_code", et))
			msg = errorMessage(resp)
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// spanRequestID is a JSON-RPC id as the span names it: a string's text, a
// number as written, cut to a bound.
func spanRequestID(raw []byte) (string, bool) {
	if raw == nil {
		return "", false
	}
	if isString(raw) {
		if s, ok := decodeString(raw); ok {
			raw = []byte(s)
		}
	}
	return requestID(raw), true
}

// errorMessage reads the message of the JSON-RPC error the adapter wrote
// in resp (its own bytes: see errorType).
func errorMessage(resp []byte) string {
	const head = `,"message":`
	i := bytes.Index(resp, []byte(head))
	if i < 0 {
		return ""
	}
	start := i + len(head)
	if start >= len(resp) || resp[start] != '"' {
		return ""
	}
	end, _ := skipString(resp, start)
	if end < 0 {
		return ""
	}
	s, _ := decodeString(resp[start:end])
	return s
}
