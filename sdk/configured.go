package sdk

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
)

// Configured holds the service a plugin builds when the host configures
// it (a store, a client), for the functions the host calls afterwards:
// tool handlers, owner resolvers and entity sources. Configure returns
// one; Method binds a method of the service to a tool, and a Configured
// whose service has the methods of EntitySource is an Entity's Source:
//
//	svc := sdk.Configure(p, func(ctx context.Context, env sdk.Env, cfg Config) (*Service, error) {
//		return Open(ctx, env.DataDir, cfg)
//	})
//	sdk.Add(p, sdk.Tool[IDIn, Booking]{
//		...,
//		Handler: sdk.Method(svc, (*Service).Get),
//		Owner:   sdk.Method(svc, (*Service).Owner),
//	})
//	p.ProvideEntity(sdk.Entity{Name: "booking.resource", Source: svc})
//
// The host sends no call before configuring the plugin, so a call that
// finds nothing set is a bug; it fails with an error naming the plugin
// rather than a nil dereference. A Configured is safe for concurrent use.
type Configured[S any] struct {
	plugin string
	v      atomic.Pointer[S]
}

// Configure sets how the plugin builds its service when the host
// configures it, and returns the Configured its tools are bound to. The
// plugin's config block is decoded into C first, strictly: a key C has no
// field for fails the host's start-up with its name. Use struct{} for a
// plugin without options. build runs once, before any call; its error
// stops the host's start-up with the message, so say which option is
// wrong.
//
// When C has a method Check() error, it runs on the decoded block before
// build, and its error stops start-up as build's does. `capgate validate`
// runs the decoding and Check but never build, so put in Check every test
// of the block that needs nothing opened (a value out of range, a name
// that refers to nothing): validate then catches it without touching the
// plugin's stores.
func Configure[S, C any](p *Plugin, build func(ctx context.Context, env Env, cfg C) (*S, error)) *Configured[S] {
	c := &Configured[S]{plugin: p.name}
	decode := func(env Env) (C, error) {
		var cfg C
		env.markRead()
		if err := decodeStrict(env.config, &cfg); err != nil {
			return cfg, fmt.Errorf("%s config: %w", p.name, err)
		}
		if ch, ok := any(&cfg).(interface{ Check() error }); ok {
			if err := ch.Check(); err != nil {
				return cfg, err
			}
		}
		return cfg, nil
	}
	p.OnConfigure(func(ctx context.Context, env Env) error {
		cfg, err := decode(env)
		if err != nil {
			return err
		}
		s, err := build(ctx, env, cfg)
		if err != nil {
			return err
		}
		if s == nil {
			return fmt.Errorf("%s plugin: Configure built no service (nil)", p.name)
		}
		c.v.Store(s)
		return nil
	})
	// How to check the block without building the service: the
	// check-only configuration of `capgate validate`.
	p.checkConfig = func(_ context.Context, env Env) error {
		_, err := decode(env)
		return err
	}
	return c
}

// checker returns how to check p's config block without configuring p:
// Configure's decoding and Check, or, for a plugin that reads no config,
// nothing (the unread-keys test follows). ok is false when only p's own
// OnConfigure function could tell.
func checker(p *Plugin) (check func(context.Context, Env) error, ok bool) {
	if p.checkConfig != nil {
		return p.checkConfig, true
	}
	if p.configure == nil {
		return func(context.Context, Env) error { return nil }, true
	}
	return nil, false
}

// Get returns the service Configure built, or an error naming the plugin
// before it was built.
func (c *Configured[S]) Get() (*S, error) {
	if s := c.v.Load(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%s plugin is not configured", c.plugin)
}

// Method runs a method of the configured service as a tool's Handler or
// Owner:
//
//	Handler: sdk.Method(svc, (*Service).Cancel),
//
// Before the service is built, the call fails with Get's error.
func Method[S, In, Out any](c *Configured[S], m func(*S, context.Context, Call, In) (Out, error)) func(context.Context, Call, In) (Out, error) {
	return func(ctx context.Context, call Call, in In) (Out, error) {
		s, err := c.Get()
		if err != nil {
			var zero Out
			return zero, err
		}
		return m(s, ctx, call, in)
	}
}

func (c *Configured[S]) source() (EntitySource, error) {
	s, err := c.Get()
	if err != nil {
		return nil, err
	}
	src, ok := any(s).(EntitySource)
	if !ok {
		return nil, fmt.Errorf("%s plugin: %T is no sdk.EntitySource", c.plugin, s)
	}
	return src, nil
}

// sourceType lets ProvideEntity refuse, at declaration, a Configured whose
// service cannot be a Source.
func (c *Configured[S]) sourceType() (string, bool) {
	return reflect.TypeFor[*S]().String(), reflect.TypeFor[*S]().Implements(reflect.TypeFor[EntitySource]())
}

// Documents implements EntitySource with the configured service's method.
func (c *Configured[S]) Documents(ctx context.Context, after string, limit int) ([]Document, error) {
	src, err := c.source()
	if err != nil {
		return nil, err
	}
	return src.Documents(ctx, after, limit)
}

// DocumentsByID implements EntitySource with the configured service's
// method.
func (c *Configured[S]) DocumentsByID(ctx context.Context, ids []string) ([]Document, error) {
	src, err := c.source()
	if err != nil {
		return nil, err
	}
	return src.DocumentsByID(ctx, ids)
}

// Record implements EntitySource with the configured service's method.
func (c *Configured[S]) Record(ctx context.Context, id string) (any, error) {
	src, err := c.source()
	if err != nil {
		return nil, err
	}
	return src.Record(ctx, id)
}
