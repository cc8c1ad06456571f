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
// # Bounds
//
// Every string, slice and map of a capability's input is bounded in its
// schema, so an agent reads the limits in tools/list and the host refuses
// an argument over them before the handler runs. A field declares its own
// with a `capgate` tag (BoundsTag: maxLength, minLength, maxItems,
// minItems, maxProperties, minimum, maximum); one that declares none gets
// DefaultMaxLength, DefaultMaxItems or DefaultMaxProperties. A result
// larger than the host's max_result_bytes is answered with an error the
// agent can act on instead of being sent.
//
//	type FindIn struct {
//		Query string `json:"query" capgate:"minLength=1,maxLength=200" jsonschema:"what to look for"`
//		Limit int    `json:"limit,omitempty" capgate:"minimum=0,maximum=100"`
//	}
//
// # Lifecycle
//
// The host runs every plugin through the same steps: configure (OnConfigure
// gets the Env: data directory, config block, logger, max_results), describe
// (the host registers the capabilities and entity types), start (once every
// plugin is configured and described, OnStart runs with the same Env), then
// calls, and finally close (the OnClose functions, last registered first).
// An error from OnConfigure or OnStart stops the host's start-up. The Env's
// Publish works from OnConfigure on; its Catalogue, Documents, Record and
// Subscribe answer from OnStart on, when the other plugins are up.
//
// A plugin whose handlers share a service built in OnConfigure (a store
// opened on the configured database) keeps it in a Configured and turns the
// service's methods into handlers with Handler, Bind and Bind2; a call that
// arrives before OnConfigure set it fails with an error naming the plugin.
//
//	svc := &sdk.Configured[Service]{Plugin: p.Name()}
//	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
//		s, err := NewService(ctx, env)
//		if err != nil {
//			return err
//		}
//		svc.Set(s)
//		return nil
//	})
//	sdk.Add(p, sdk.Tool[CancelIn, CancelOut]{
//		Name: "shop.cancel", Kind: sdk.Action, Pack: "shop", Permission: "shop.order",
//		Handler: sdk.Handler(svc, (*Service).Cancel),
//		Owner:   sdk.Bind(svc, (*Service).OrderOwner),
//	})
//
// # Catalogue entities
//
// A plugin that owns public records (rooms, products, articles) declares
// their type with ProvideEntity, giving functions that page through their
// search documents, fetch documents by id and return a full record. Search
// indexes them, and platform.get and MCP resources/read return the records,
// all through the gate. Publish "catalogue.upsert" or "catalogue.delete"
// events after each change so indexes stay current, and bump
// Entity.Version when the documents' text changes shape.
//
//	p.ProvideEntity(sdk.Entity{
//		Name: "shop.product", Description: "a product in the shop", Version: "1",
//		List:   store.ProductDocuments,     // (ctx, after, limit): sorted by id
//		Get:    store.ProductDocumentsByID, // (ctx, ids): those that exist
//		Record: store.Product,              // (ctx, id): a JSON object or NotFound
//	})
//
// A plugin that uses other plugins' catalogues (an indexer) reads them in
// OnStart through Env.Catalogue, Env.Documents and Env.Record, and follows
// changes with Env.Subscribe in a goroutine that OnClose stops.
//
// Package sdktest runs a plugin through the same gRPC contract in-process,
// so a plugin's tests need no built binary and no host; its Host runs
// several plugins that use each other.
package sdk
