package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// TestOfficialSDKClientResources drives catalogue records through the
// official Go SDK client at every protocol version: the templates, every
// page of resources/list, and each listed resource read back.
func TestOfficialSDKClientResources(t *testing.T) {
	versions := []string{mcp.Version20260728, mcp.Version20251125, mcp.Version20250618, mcp.Version20250326}
	for _, ver := range versions {
		t.Run(ver, func(t *testing.T) {
			platform := mcptest.New(mcptest.WithRecords())
			records := mcp.Records{Get: mcptest.RecordGet, List: mcptest.RecordList}
			for _, e := range mcptest.Entities {
				records.Entities = append(records.Entities, mcp.EntityType{Name: e.Name, Description: e.Description})
			}
			srv := New(Options{
				Enabled:    true,
				Version:    "9.9.9",
				Dispatcher: platform.Dispatcher,
				Auth:       newStore(t),
				Records:    records,
				Logger:     slog.New(slog.DiscardHandler),
			})
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			client := sdk.NewClient(&sdk.Implementation{Name: "capgate-test", Version: "0.0.1"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			session, err := client.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint:   ts.URL + MCPPath,
				HTTPClient: &http.Client{Transport: &bearer{token: aliceToken, next: http.DefaultTransport}},
				MaxRetries: -1,
			}, &sdk.ClientSessionOptions{ProtocolVersion: ver})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer session.Close()
			if got := session.InitializeResult().ProtocolVersion; got != ver {
				t.Fatalf("negotiated %s, want %s", got, ver)
			}

			templates, err := session.ListResourceTemplates(ctx, nil)
			if err != nil {
				t.Fatalf("resources/templates/list: %v", err)
			}
			var gotTemplates []string
			for _, tmpl := range templates.ResourceTemplates {
				gotTemplates = append(gotTemplates, tmpl.URITemplate)
				if tmpl.MIMEType != "application/json" || tmpl.Description == "" {
					t.Errorf("template = %+v", tmpl)
				}
			}
			if want := []string{"capgate://booking.resource/{id}", "capgate://booking.service/{id}"}; !slices.Equal(gotTemplates, want) {
				t.Fatalf("templates = %v, want %v", gotTemplates, want)
			}

			// Page by hand, so the pages themselves are checked.
			var uris []string
			var cursor string
			pages := 0
			for {
				page, err := session.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
				if err != nil {
					t.Fatalf("resources/list page %d: %v", pages+1, err)
				}
				pages++
				for _, r := range page.Resources {
					uris = append(uris, r.URI)
				}
				if page.NextCursor == "" || pages > 10 {
					break
				}
				cursor = page.NextCursor
			}
			if want := (len(mcptest.Records) + mcptest.RecordPageSize - 1) / mcptest.RecordPageSize; pages != want {
				t.Fatalf("%d pages, want %d", pages, want)
			}
			// The SDK's own iterator walks the same pages.
			var iterated []string
			for r, err := range session.Resources(ctx, nil) {
				if err != nil {
					t.Fatalf("Resources: %v", err)
				}
				iterated = append(iterated, r.URI)
			}
			if len(uris) != len(mcptest.Records) || !slices.Equal(iterated, uris) {
				t.Fatalf("listed %v, iterated %v", uris, iterated)
			}

			for i, uri := range uris {
				res, err := session.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
				if err != nil {
					t.Fatalf("resources/read %s: %v", uri, err)
				}
				if len(res.Contents) != 1 || res.Contents[0].URI != uri || res.Contents[0].MIMEType != "application/json" {
					t.Fatalf("contents = %+v", res.Contents)
				}
				var got, want any
				if err := json.Unmarshal([]byte(res.Contents[0].Text), &got); err != nil {
					t.Fatalf("text %q: %v", res.Contents[0].Text, err)
				}
				_ = json.Unmarshal(mcptest.Records[i].Data, &want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s reads %s, want %s", uri, res.Contents[0].Text, mcptest.Records[i].Data)
				}
			}

			var rpcErr *jsonrpc.Error
			_, err = session.ReadResource(ctx, &sdk.ReadResourceParams{URI: "capgate://booking.resource/room-9"})
			wantCode := int64(-32002)
			if ver == mcp.Version20260728 {
				wantCode = -32602
			}
			if !errors.As(err, &rpcErr) || rpcErr.Code != wantCode {
				t.Fatalf("missing record: %v, want code %d", err, wantCode)
			}
			_, err = session.ReadResource(ctx, &sdk.ReadResourceParams{URI: "capgate://booking.resource/a/b"})
			if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
				t.Fatalf("malformed uri: %v", err)
			}
		})
	}
}
