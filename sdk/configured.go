package sdk

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Configured holds what a plugin builds in OnConfigure (its service, a
// store) for the functions the host calls afterwards: tool handlers, owner
// resolvers and entity functions. OnConfigure calls Set; Handler, Bind and
// Bind2 turn methods of S into those functions, so each is one line:
//
//	svc := &sdk.Configured[Service]{Plugin: p.Name()}
//	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
//		... build s ...
//		svc.Set(s)
//		return nil
//	})
//	sdk.Add(p, sdk.Tool[IDIn, Booking]{
//		...,
//		Handler: sdk.Handler(svc, (*Service).Get),
//		Owner:   sdk.Bind(svc, (*Service).Owner),
//	})
//
// The host sends no call before configuring the plugin, so a call that
// finds nothing set is a bug; it fails with an error naming the plugin
// rather than a nil dereference. The zero value is ready to use, and a
// Configured is safe for concurrent use. It must not be copied after
// first use.
type Configured[S any] struct {
	// Plugin names the plugin in the error calls before Set return;
	// usually p.Name(). Optional.
	Plugin string

	v atomic.Pointer[S]
}

// Set hands s to every later Get, from any goroutine.
func (c *Configured[S]) Set(s *S) { c.v.Store(s) }

// Get returns what Set stored, or an error naming the plugin if nothing
// was (or nil was).
func (c *Configured[S]) Get() (*S, error) {
	if s := c.v.Load(); s != nil {
		return s, nil
	}
	if c.Plugin == "" {
		return nil, fmt.Errorf("plugin is not configured")
	}
	return nil, fmt.Errorf("%s plugin is not configured", c.Plugin)
}

// Handler adapts a method of S to a Tool's Handler: the method runs on
// what c holds, or the call fails with Get's error.
//
//	Handler: sdk.Handler(svc, (*Service).Cancel),
func Handler[S, In, Out any](c *Configured[S], m func(*S, context.Context, Call, In) (Out, error)) func(context.Context, Call, In) (Out, error) {
	return Bind2(c, m)
}

// Bind adapts a method of S that takes a context and one argument: a
// Tool's Owner (the input), an Entity's Get (ids) or Record (an id).
//
//	Owner:  sdk.Bind(svc, (*Service).Owner),
//	Record: sdk.Bind(svc, (*Service).ResourceRecord),
func Bind[S, A, R any](c *Configured[S], m func(*S, context.Context, A) (R, error)) func(context.Context, A) (R, error) {
	return func(ctx context.Context, a A) (R, error) {
		s, err := c.Get()
		if err != nil {
			var zero R
			return zero, err
		}
		return m(s, ctx, a)
	}
}

// Bind2 adapts a method of S that takes a context and two arguments: an
// Entity's List (after, limit). Handler is Bind2 for tool handlers.
//
//	List: sdk.Bind2(svc, (*Service).ResourceDocuments),
func Bind2[S, A, B, R any](c *Configured[S], m func(*S, context.Context, A, B) (R, error)) func(context.Context, A, B) (R, error) {
	return func(ctx context.Context, a A, b B) (R, error) {
		s, err := c.Get()
		if err != nil {
			var zero R
			return zero, err
		}
		return m(s, ctx, a, b)
	}
}
