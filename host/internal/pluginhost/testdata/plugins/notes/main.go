// Command notes is a test plugin: an owner-guarded read over a fixed set of
// notes, configured to fail or log on demand.
package main

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/capgate/capgate/sdk"
)

type config struct {
	Pack          string `json:"pack"`
	FailConfigure string `json:"fail_configure"`
	Hello         string `json:"hello"`
	// ChangeOnRestart makes every process after the first declare one
	// more capability, as a binary replaced by another would.
	ChangeOnRestart bool `json:"change_on_restart"`
}

type in struct {
	ID   string `json:"id"`
	Size int    `json:"size,omitempty"`
}

type envOut struct {
	Env []string `json:"env"`
}

// changedMark, in the plugin's data directory (its working directory),
// says an earlier process ran with change_on_restart.
const changedMark = "changed"

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
		if c.ChangeOnRestart {
			if err := os.WriteFile(changedMark, nil, 0o600); err != nil {
				return err
			}
		}
		return nil
	})
	p.OnStart(func(ctx context.Context, env sdk.Env, _ sdk.Start) error {
		env.Logger.Info("notes started", "pid", os.Getpid())
		return nil
	})
	if _, err := os.Stat(changedMark); err == nil {
		sdk.Add(p, sdk.Tool[in, out]{
			Name: "notes.extra", Description: "Only in a changed binary.", Kind: sdk.Read, Pack: "notes",
			Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) { return out{}, nil },
		})
	}
	// notes.env shows the plugin's environment.
	sdk.Add(p, sdk.Tool[in, envOut]{
		Name: "notes.env", Description: "The plugin's environment.", Kind: sdk.Read, Pack: "notes",
		Handler: func(ctx context.Context, call sdk.Call, in in) (envOut, error) {
			return envOut{Env: os.Environ()}, nil
		},
	})
	// notes.big returns a text of the size asked for.
	sdk.Add(p, sdk.Tool[in, out]{
		Name: "notes.big", Description: "A result of a given size.", Kind: sdk.Read, Pack: "notes",
		Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) {
			return out{ID: in.ID, Text: strings.Repeat("x", in.Size)}, nil
		},
	})
	sdk.Add(p, sdk.Tool[in, out]{
		Name: "notes.get", Description: "Read a note.", Kind: sdk.Read, Pack: "notes", Permission: "notes.read",
		Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) {
			if _, ok := notes[in.ID]; !ok {
				return out{}, sdk.NotFound("no note %q", in.ID)
			}
			return out{ID: in.ID, Text: "note " + in.ID, By: call.Principal.UserID}, nil
		},
		Owner: func(ctx context.Context, _ sdk.Call, in in) (string, error) {
			o, ok := notes[in.ID]
			if !ok {
				return "", sdk.NotFound("no note %q", in.ID)
			}
			return o, nil
		},
	})
	// notes.steps reports size progress steps and a log message, each
	// naming the call's id, so tests can see whose notices reach whom.
	sdk.Add(p, sdk.Tool[in, out]{
		Name: "notes.steps", Description: "Report progress, then answer.", Kind: sdk.Read, Pack: "notes",
		Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) {
			call.Log(ctx, sdk.LogInfo, in.ID)
			for i := range in.Size {
				call.Progress(ctx, float64(i+1), float64(in.Size), in.ID)
			}
			return out{ID: in.ID}, nil
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
		Source: sdk.EntityFuncs{
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
			GetRecord: func(ctx context.Context, id string) (any, error) {
				by, ok := notes[id]
				if !ok {
					return nil, sdk.NotFound("no note %q", id)
				}
				return out{ID: id, Text: "note " + id, By: by}, nil
			},
		},
	})
	sdk.Serve(p)
}

func noteDoc(id string) sdk.Document {
	return sdk.Document{ID: id, Title: "note " + id, Body: "a note by " + notes[id]}
}
