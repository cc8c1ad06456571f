package dispatch

import "context"

// Admit is told that a call has passed every step of the gate and is
// about to be run by its provider. A protocol that may answer before the
// call ends (a task of the MCP tasks extension) records the call there,
// so a refused, invalid or held call never becomes one. An error stops
// the call: nothing runs, and Invoke returns the error.
type Admit func(ctx context.Context) error

type admitKey struct{}

// WithAdmit returns ctx carrying a, which the call made with ctx calls
// once, after the risk step (a held call never reaches it) and before the
// idempotency step and the run. The calls the provider makes while it
// runs do not see it. Only an adapter that needs it should add it: every
// context layer lengthens the lookups below it.
func WithAdmit(ctx context.Context, a Admit) context.Context {
	return context.WithValue(ctx, admitKey{}, a)
}

// admitted calls the Admit ctx carries, if any, and returns the context
// the run continues with: without it, so that nested calls made with the
// run's context are not taken for this one.
func admitted(ctx context.Context) (context.Context, error) {
	a, _ := ctx.Value(admitKey{}).(Admit)
	if a == nil {
		return ctx, nil
	}
	ctx = context.WithValue(ctx, admitKey{}, Admit(nil))
	return ctx, a(ctx)
}
