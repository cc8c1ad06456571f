package sdk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type reportIn struct {
	// Steps is how many progress reports to send; Repeat sends each twice.
	Steps  int    `json:"steps,omitempty"`
	Repeat bool   `json:"repeat,omitempty"`
	Big    bool   `json:"big,omitempty"`
	Note   string `json:"note,omitempty"`
}

type reportOut struct {
	WantsProgress bool `json:"wants_progress"`
	WantsDebug    bool `json:"wants_debug"`
	WantsError    bool `json:"wants_error"`
}

// reporter is a plugin whose one capability reports progress and logs at
// three levels, so a test sees what reaches the caller.
func reporter(late chan<- sdk.Call) *sdk.Plugin {
	p := sdk.New("reporter", "0.1.0")
	sdk.Add(p, sdk.Tool[reportIn, reportOut]{
		Name: "reporter.run", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, in reportIn) (reportOut, error) {
			for i := range in.Steps {
				call.Progress(ctx, float64(i+1), float64(in.Steps), in.Note)
				if in.Repeat {
					call.Progress(ctx, float64(i+1), float64(in.Steps), "again")
				}
			}
			call.Log(ctx, sdk.LogDebug, "debug detail")
			call.Log(ctx, sdk.LogInfo, map[string]any{"step": "started"})
			call.Log(ctx, sdk.LogError, "went wrong")
			if in.Big {
				call.Log(ctx, sdk.LogError, strings.Repeat("x", sdk.MaxLogData))
				call.Log(ctx, sdk.LogError, func() {}) // not JSON
			}
			if late != nil {
				late <- call
			}
			return reportOut{WantsProgress: call.WantsProgress(), WantsDebug: call.WantsLog(sdk.LogDebug), WantsError: call.WantsLog(sdk.LogError)}, nil
		},
	})
	return p
}

var reader = sdk.Principal{Role: "r", Scope: sdk.ScopeRead}

func TestNoticesOnlyWhenWanted(t *testing.T) {
	c := sdktest.Start(t, reporter(nil), nil)

	// A caller that wants nothing hears nothing, and the handler knows.
	got := sdktest.Call[reportOut](t, c, "reporter.run", reader, reportIn{Steps: 3})
	if got != (reportOut{}) {
		t.Fatalf("a caller wanting nothing: handler saw %+v", got)
	}

	ctx, heard := sdktest.Listen(context.Background(), true, sdk.LogInfo)
	raw, err := c.Invoke(ctx, "reporter.run", reader, reportIn{Steps: 3, Note: "step"})
	if err != nil {
		t.Fatal(err)
	}
	var out reportOut
	_ = json.Unmarshal(raw, &out)
	if out != (reportOut{WantsProgress: true, WantsError: true}) {
		t.Fatalf("wants seen by the handler = %+v", out)
	}
	ps := heard.Progress()
	if len(ps) != 3 || ps[0] != (sdktest.Progress{Done: 1, Total: 3, Message: "step"}) || ps[2].Done != 3 {
		t.Fatalf("progress heard = %+v", ps)
	}
	logs := heard.Logs()
	if len(logs) != 2 || logs[0].Level != sdk.LogInfo || string(logs[0].Data) != `{"step":"started"}` ||
		logs[1].Level != sdk.LogError || string(logs[1].Data) != `"went wrong"` || logs[0].Logger != "reporter.run" {
		t.Fatalf("logs heard at info = %+v", logs)
	}

	// Logs alone, from warning: no progress, one message.
	ctx, heard = sdktest.Listen(context.Background(), false, sdk.LogWarning)
	if _, err := c.Invoke(ctx, "reporter.run", reader, reportIn{Steps: 3}); err != nil {
		t.Fatal(err)
	}
	if len(heard.Progress()) != 0 || len(heard.Logs()) != 1 {
		t.Fatalf("heard progress %+v, logs %+v; want no progress, the error log alone", heard.Progress(), heard.Logs())
	}
}

func TestNoticesBounded(t *testing.T) {
	c := sdktest.Start(t, reporter(nil), nil)

	// A report that does not advance is dropped.
	ctx, heard := sdktest.Listen(context.Background(), true, 0)
	if _, err := c.Invoke(ctx, "reporter.run", reader, reportIn{Steps: 3, Repeat: true}); err != nil {
		t.Fatal(err)
	}
	if ps := heard.Progress(); len(ps) != 3 {
		t.Fatalf("repeated reports heard: %+v", ps)
	}

	// A burst beyond the rate is cut to it, and a long message is cut.
	ctx, heard = sdktest.Listen(context.Background(), true, sdk.LogError)
	note := strings.Repeat("é", sdk.MaxNoticeMessage)
	if _, err := c.Invoke(ctx, "reporter.run", reader, reportIn{Steps: 500, Note: note, Big: true}); err != nil {
		t.Fatal(err)
	}
	ps := heard.Progress()
	if len(ps) < sdk.NoticeBurst-1 || len(ps) > sdk.NoticeBurst+5 {
		t.Fatalf("a burst of 500 reports: %d heard, want about %d", len(ps), sdk.NoticeBurst)
	}
	if m := ps[0].Message; len(m) > sdk.MaxNoticeMessage || !strings.HasPrefix(note, m) || len(m) < sdk.MaxNoticeMessage-2 {
		t.Fatalf("a long message came as %d bytes", len(m))
	}
	// The oversized and unencodable log data never go; the rate may take
	// the error log too, but nothing over MaxLogData is heard.
	for _, l := range heard.Logs() {
		if len(l.Data) > sdk.MaxLogData {
			t.Fatalf("log data of %d bytes heard", len(l.Data))
		}
	}
}

func TestNoticesAfterTheResultAreDropped(t *testing.T) {
	late := make(chan sdk.Call, 1)
	c := sdktest.Start(t, reporter(late), nil)
	ctx, heard := sdktest.Listen(context.Background(), true, sdk.LogDebug)
	if _, err := c.Invoke(ctx, "reporter.run", reader, reportIn{Steps: 1}); err != nil {
		t.Fatal(err)
	}
	before := len(heard.Progress()) + len(heard.Logs())
	call := <-late
	call.Progress(context.Background(), 99, 100, "late")
	call.Log(context.Background(), sdk.LogEmergency, "late")
	if after := len(heard.Progress()) + len(heard.Logs()); after != before || before != 4 {
		t.Fatalf("heard %d notices, then %d after the result; want 4 and no more", before, after)
	}
	// A Call made by hand, no host's, reports to no one and does not fail.
	var none sdk.Call
	none.Progress(context.Background(), 1, 1, "")
	none.Log(context.Background(), sdk.LogInfo, "x")
	if none.WantsProgress() || none.WantsLog(sdk.LogEmergency) {
		t.Fatal("a Call no host made wants notices")
	}
}
