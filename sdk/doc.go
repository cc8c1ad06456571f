// Package sdk is how a capgate plugin is written.
//
// A plugin is a small program: it declares its capabilities as typed Go
// handlers and hands itself to Serve. The SDK infers each capability's
// input and output JSON Schema from the handler's types, speaks the gRPC
// contract with the host (handshake, configuration, lifecycle, logging), and
// turns the errors NotFound, InvalidInput, Conflict and Unavailable into
// results the calling agent can act on.
//
//	p := sdk.New("greeter", "1.0.0")
//	sdk.Add(p, sdk.Tool[GreetIn, GreetOut]{
//		Name: "greeter.greet", Kind: sdk.Read, Permission: "greeter.use",
//		Handler: func(ctx context.Context, call sdk.Call, in GreetIn) (GreetOut, error) {
//			return GreetOut{Greeting: "hello, " + in.Name}, nil
//		},
//	})
//	sdk.Serve(p)
//
// A capability belongs to the plugin's pack (its name, unless SetPack or
// Tool.Pack says otherwise), the operator's switch for it.
//
// # The gate
//
// The host authorizes every call before a plugin's handler runs, in a
// fixed order: the pack is on, an action's caller is bound to a user, the
// caller's scope and role allow the capability, the arguments match the
// input schema and, for a tool with an Owner, the target belongs to the
// caller (admin scope excepted). Only the plugin knows who owns its
// records, so the last step runs in the plugin, in the same call: the SDK
// decodes the arguments once, asks Owner, and refuses a caller who is not
// the owner before Handler runs (an Owner that loaded the target hands it
// to the Handler with Call.Keep, so it is read once). Results are checked
// against the output schema on their way back. A handler still checks what
// only it can know (that a time slot exists, that a record is in the right
// state).
//
// A refusal reaches a plugin that calls another capability (Call.Invoke)
// as a *RefusedError naming the Step; a failure for the agent is an
// *Error with its ErrorCode (CodeOf, IsNotFound). Package sdktest reports
// the outcomes of calls the same way, so a plugin's tests assert each
// refusal of its own capabilities.
//
// # Bounds
//
// Every string, slice and map of a capability's input is bounded in its
// schema, so an agent reads the limits in tools/list and the host refuses
// an argument over them before the handler runs. A field declares its own
// with a `capgate` tag (BoundsTag: maxLength, minLength, maxItems,
// minItems, maxProperties, minimum, maximum); one that declares none gets
// DefaultMaxLength, DefaultMaxItems or DefaultMaxProperties. A result
// larger than the host's max_result_bytes is answered with an error the
// agent can act on instead of being sent. Slices are JSON arrays, never
// null: a nil slice or map in a result is sent as [] or {}.
//
//	type FindIn struct {
//		Query string `json:"query" capgate:"minLength=1,maxLength=200" jsonschema:"what to look for"`
//		Limit int    `json:"limit,omitempty" capgate:"minimum=0,maximum=100"`
//	}
//
// # Names, titles, icons, hints, headers and schemas
//
// A capability's name is lower-case segments joined by dots
// ("booking.cancel", the convention) or a single one ("echo_text"), at
// most 128 characters. Tool.Title and Tool.Icons (https or data: images)
// are for people; IdempotentHint and OpenWorldHint, when set, replace what
// the kind implies. A `capgate:"header=Region"` tag asks clients to mirror
// the argument into the Mcp-Param-Region header (x-mcp-header). A type
// that contains itself becomes a $defs entry referred to with $ref; what no
// Go type can say (if/then/else, allOf, $anchor) goes in Tool.InputSchema,
// which must bound every place itself.
//
// # Rich results and resources
//
// A capability whose Out is Contents answers content blocks (Text, Image,
// Audio, ResourceLink, EmbeddedText, EmbeddedBlob) and no structured
// value; one whose Out is Rich[T] answers blocks beside a T, checked
// against T's schema. Out may be any type: MCP 2026-07-28 takes any JSON
// value as a structured result. The blocks reach an MCP client only; a
// nested Call.Invoke gets the structured value alone.
//
// AddResource and AddResourceTemplate declare resources the plugin serves
// to resources/read, each gated like a read capability of its Pack and
// Permission; a template's Read gets the URI's variables, and NotFound
// from it is, to the caller, no resource at all.
//
// # Progress and log messages
//
// A handler tells its caller how far it has come with Call.Progress and
// sends it log messages with Call.Log, at the RFC 5424 levels (LogDebug to
// LogEmergency). Both are cheap no-ops unless the caller asked (an MCP
// client's progress token, its log level): Call.WantsProgress and
// Call.WantsLog say so, to skip work done for the report alone. They never
// fail the call and never wait for the caller: a report that does not
// advance, and what goes over a call's bounds (MaxNoticeMessage,
// MaxLogData, MaxNoticesPerCall, NoticeBurst, NoticeRate), is dropped and
// counted in the plugin's log at debug. None is sent once the handler has
// returned. A log message goes to the agent: say what the call does,
// never a secret; the operator's log is Plugin.Logger. A nested call
// (Call.Invoke) streams nothing to the caller.
//
// # Lifecycle
//
// The host runs every plugin through the same steps: configure (the Env:
// data directory, config block, logger, max_results), describe (the host
// registers the capabilities and entity types), start (once every plugin
// is configured and described, OnStart runs with the same Env), then
// calls, and finally close (the OnClose functions, last registered first).
// An error from configuring or OnStart stops the host's start-up. The
// Env's Publish works from configuration on; its Catalogue, Documents,
// Record and Subscribe answer from OnStart on, when the other plugins are
// up.
//
// Most plugins build one service from their config block (a store opened
// on the configured database) and serve their capabilities from its
// methods. Configure decodes the block into a Go type, strictly (a key the
// type lacks fails start-up, naming it), builds the service and returns
// the Configured its tools bind to with Method; a call that arrives before
// the service is built fails with an error naming the plugin. A plugin
// that reads its config block neither this way nor with Env.DecodeConfig
// or Env.ConfigJSON gets a start-up error for any key in it.
//
//	svc := sdk.Configure(p, func(ctx context.Context, env sdk.Env, cfg Config) (*Service, error) {
//		return NewService(ctx, env.DataDir, cfg)
//	})
//	sdk.Add(p, sdk.Tool[CancelIn, CancelOut]{
//		Name: "shop.cancel", Kind: sdk.Action, Permission: "shop.order",
//		Handler: sdk.Method(svc, (*Service).Cancel),
//		Owner:   sdk.Method(svc, (*Service).OrderOwner),
//	})
//
// # Prompts
//
// AddPrompt declares a prompt: a message template a client offers its
// user, rendered by Render with the caller's arguments (the string fields
// of a struct, inferred as for tools) and gated as a read capability of
// its pack and permission. Complete maps an argument to a Completer that
// suggests values as the user types, only ones the caller may read;
// CompleteTemplate does the same for a variable of a resource template.
//
// # Catalogue entities
//
// A plugin that owns public records (rooms, products, articles) declares
// their type with ProvideEntity and an EntitySource that pages through
// their search documents, fetches documents by id and returns a full
// record. Search indexes them, and platform.get and MCP resources/read
// return the records, all through the gate. Publish "catalogue.upsert" or
// "catalogue.delete" events after each change so indexes stay current, and
// bump Entity.Version when the documents' text changes shape. A Configured
// service with the EntitySource methods is a Source itself; EntityFuncs
// makes one of three functions.
//
//	p.ProvideEntity(sdk.Entity{
//		Name: "shop.product", Description: "a product in the shop", Version: "1",
//		Source: svc, // *Service has Documents, DocumentsByID and Record
//	})
//
// A plugin that uses other plugins' catalogues (an indexer) reads them in
// OnStart through Env.Catalogue, Env.Documents and Env.Record, and follows
// changes with Env.Subscribe in a goroutine that OnClose stops.
//
// # Asking the caller's client
//
// A handler that needs its caller's client to answer before it can finish
// asks it: Call.Elicit puts a form to the user, Call.Sample asks the
// client's model for a message, Call.ListRoots asks for the client's
// roots. Each ask names a key. No server keeps anything between calls, so
// an ask does not wait: until its answer has come, it returns an error
// wrapping ErrInputRequired, which the handler returns as is once it has
// made every ask it can make now (they go to the client together). The
// client answers and sends the same call again, through the whole gate;
// the handler runs again from the start, and the same asks now return
// their answers. Answers are kept from round to round, so asks in turn
// are straight-line code; Call.SetRoundState keeps more. Ask before
// acting: what runs before the last ask runs once a round.
//
//	ans, err := call.Elicit(ctx, "size", sdk.FormFor[Size]("Which size?"))
//	if err != nil {
//		return Out{}, err // ErrInputRequired, or a *CannotAskError
//	}
//
// A client that did not declare what an ask needs makes it a
// *CannotAskError: go on without the answer, or return it and the call
// fails naming the capability the client would have to declare.
// sdktest.Client.InvokeAsking answers a handler's asks in tests.
//
// A prompt's Render asks the same way, with the Call it is given, its
// rounds sealed to the prompt and its arguments;
// sdktest.Client.GetPromptAsking answers them in tests.
//
// # Traces
//
// When the host traces a call, the handler's context carries a span the
// SDK started under the host's: spans started from it (through
// trace.SpanFromContext(ctx).TracerProvider(), or OpenTelemetry's global
// provider, which Serve sets) nest under the call, go back to the host with
// the call's answer and are exported with the host's. A plugin needs no
// exporter of its own, and records nothing when the host does not trace.
//
// # Testing
//
// Package sdktest runs a plugin in-process exactly as the host runs it,
// over the same gRPC contract and through the host's own gate, so a
// plugin's tests need no built binary and no host; its Host runs several
// plugins that use each other and sets the gate's policy (roles, packs).
// sdktest.Listen makes a call that hears the handler's progress and log
// messages, as an MCP client that asked for them.
package sdk
