package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
)

// A call that finds the plugin's call stream already ended (the process
// died a moment before the supervisor notices) is told at once that the
// plugin is restarting and nothing ran, not that it failed: nothing was
// sent, so a retry, or a retry with its idempotency key, may run it.
func TestCallAfterTheStreamEndedRanNothing(t *testing.T) {
	p := sdk.New("notes", "1")
	sdk.Add(p, sdk.Tool[struct{}, struct{}]{Name: "notes.ping", Kind: sdk.Read, Pack: "notes",
		Handler: func(context.Context, sdk.Call, struct{}) (struct{}, error) { return struct{}{}, nil }})
	var srv *grpc.Server
	rpc := capgatev1.NewPluginServiceClient(serve(t, func(s *grpc.Server) {
		srv = s
		capgatev1.RegisterPluginServiceServer(s, sdkserver.NewServer(p))
	}))
	ctx := context.Background()
	if _, err := rpc.Configure(ctx, &capgatev1.ConfigureRequest{ConfigJson: []byte("{}"), DataDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	calls, err := pluginwire.OpenCalls(ctx, rpc)
	if err != nil {
		t.Fatal(err)
	}
	pl := servedPlugin(Spec{Name: "notes", MaxInFlight: 8}, rpc, &capgatev1.DescribeResponse{})
	pl.cur.Load().calls = calls
	if _, err := pl.Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.ping", Args: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("a call while the plugin runs: %v", err)
	}
	srv.Stop() // the process is gone; the supervisor has not noticed yet
	deadline := time.Now().Add(5 * time.Second)
	for !calls.Ended() {
		if time.Now().After(deadline) {
			t.Fatal("the call stream did not end")
		}
		time.Sleep(time.Millisecond)
	}
	_, err = pl.Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.ping", Args: json.RawMessage(`{}`)})
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.Unavailable || !strings.Contains(te.Message, `plugin "notes" is restarting after it stopped`) ||
		!strings.Contains(te.Message, "nothing ran") {
		t.Errorf("a call after the stream ended = %v", err)
	}
	if n := pl.InFlight(); n != 0 {
		t.Errorf("%d calls in flight after the refusal", n)
	}
}
