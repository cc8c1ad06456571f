// Package sdk is how a capgate plugin is written.
//
// A plugin is a small program: it declares its capabilities as typed Go
// handlers and hands itself to Serve. The SDK infers each capability's
// input and output JSON Schema from the handler's types, speaks the gRPC
// contract with the host (handshake, configuration, lifecycle, logging), and
// turns the errors NotFound, InvalidInput and Conflict into results the
// calling agent can act on.
//
//	p := sdk.New("greeter", "1.0.0")
//	sdk.Add(p, sdk.Tool[GreetIn, GreetOut]{
//		Name: "greeter.greet", Kind: sdk.Read, Pack: "greeter", Permission: "greeter.use",
//		Handler: func(ctx context.Context, call sdk.Call, in GreetIn) (GreetOut, error) {
//			return GreetOut{Greeting: "hello, " + in.Name}, nil
//		},
//	})
//	sdk.Serve(p)
//
// The host authorizes every call before a plugin sees it: the pack is on,
// the caller's scope and role allow the capability, the arguments match the
// input schema and, for a tool with an Owner resolver, the target belongs to
// the caller. A handler still checks what only it can know (that a time slot
// exists, that a record is in the right state).
//
// Package sdktest runs a plugin through the same gRPC contract in-process,
// so a plugin's tests need no built binary and no host.
package sdk
