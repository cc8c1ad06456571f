// Command notes is a test plugin: an owner-guarded read over a fixed set of
// notes, configured to fail or log on demand.
package main

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/capgate/capgate/sdk"
)

type config struct {
	Pack          string `json:"pack"`
	FailConfigure string `json:"fail_configure"`
	Hello         string `json:"hello"`
}

type in struct {
	ID string `json:"id"`
}

type out struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	By   string `json:"by"`
}

var notes = map[string]string{"n1": "alice", "n2": "bob"}

func main() {
	p := sdk.New("notes", "1.2.3")
	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
		var c config
		if err := env.DecodeConfig(&c); err != nil {
			return err
		}
		if c.FailConfigure != "" {
			return errors.New(c.FailConfigure)
		}
		if c.Hello != "" {
			env.Logger.Info("hello from plugin", "greeting", c.Hello)
		}
		return nil
	})
	sdk.Add(p, sdk.Tool[in, out]{
		Name: "notes.get", Description: "Read a note.", Kind: sdk.Read, Pack: "notes", Permission: "notes.read",
		Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) {
			if _, ok := notes[in.ID]; !ok {
				return out{}, sdk.NotFound("no note %q", in.ID)
			}
			return out{ID: in.ID, Text: "note " + in.ID, By: call.Principal.UserID}, nil
		},
		Owner: func(ctx context.Context, in in) (string, error) {
			o, ok := notes[in.ID]
			if !ok {
				return "", sdk.NotFound("no note %q", in.ID)
			}
			return o, nil
		},
	})
	// notes.wait blocks until the host gives up on the call, then logs how
	// it ended, so tests can see a cancellation reach the plugin.
	sdk.Add(p, sdk.Tool[in, out]{
		Name: "notes.wait", Description: "Wait for cancellation.", Kind: sdk.Read, Pack: "notes",
		Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) {
			<-ctx.Done()
			p.Logger().Info("wait ended", "id", in.ID, "cause", ctx.Err().Error())
			return out{}, ctx.Err()
		},
	})
	p.ProvideEntity(sdk.Entity{
		Name: "notes.note", Description: "a note", Version: "1",
		List: func(ctx context.Context, after string, limit int) ([]sdk.Document, error) {
			var docs []sdk.Document
			for _, id := range slices.Sorted(maps.Keys(notes)) {
				if id > after && len(docs) < limit {
					docs = append(docs, noteDoc(id))
				}
			}
			return docs, nil
		},
		Get: func(ctx context.Context, ids []string) ([]sdk.Document, error) {
			var docs []sdk.Document
			for _, id := range ids {
				if _, ok := notes[id]; ok {
					docs = append(docs, noteDoc(id))
				}
			}
			return docs, nil
		},
		Record: func(ctx context.Context, id string) (any, error) {
			by, ok := notes[id]
			if !ok {
				return nil, sdk.NotFound("no note %q", id)
			}
			return out{ID: id, Text: "note " + id, By: by}, nil
		},
	})
	sdk.Serve(p)
}

func noteDoc(id string) sdk.Document {
	return sdk.Document{ID: id, Title: "note " + id, Body: "a note by " + notes[id]}
}
