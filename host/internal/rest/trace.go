package rest

import (
	"context"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// w3c is the propagation the adapter reads from a request's headers.
var w3c = propagation.TraceContext{}

// callRoute is the route of a call, as spans name it: the capability is
// an attribute, so the route stays low in cardinality.
const callRoute = CapabilitiesPath + "/{name}"

// startSpan starts the call's server span, after OpenTelemetry's HTTP
// conventions ("POST /api/v1/capabilities/{name}") with the tool
// attributes MCP's spans carry, and returns the context the call runs in
// and what ends the span. The parent is the W3C trace context of the
// request's headers.
func (c *call) startSpan(ctx context.Context) (context.Context, func()) {
	ctx = w3c.Extract(ctx, propagation.HeaderCarrier(c.r.Header))
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", c.r.Method),
		attribute.String("http.route", callRoute),
		attribute.String("network.protocol.name", "http"),
		attribute.String("gen_ai.operation.name", "execute_tool"),
	}
	if host, port, err := net.SplitHostPort(c.r.RemoteAddr); err == nil {
		attrs = append(attrs, attribute.String("client.address", host))
		if n, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("client.port", n))
		}
	}
	// Only a registered name: a caller's made-up one is not kept.
	if e, ok := c.h.reg.Lookup(c.name); ok {
		attrs = append(attrs, attribute.String("gen_ai.tool.name", e.Name))
	}
	ctx, span := c.h.tracer.Start(ctx, c.r.Method+" "+callRoute,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, func() {
		if c.status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", c.status))
		}
		if c.failure != nil {
			et := strconv.Itoa(c.failure.Status)
			if c.failure.Step != "" {
				et = c.failure.Step
			} else if c.failure.Code != "" {
				et = c.failure.Code
			}
			span.SetAttributes(attribute.String("error.type", et))
			if c.failure.Status >= 500 {
				span.SetStatus(codes.Error, c.failure.Detail)
			}
		}
		span.End()
	}
}
