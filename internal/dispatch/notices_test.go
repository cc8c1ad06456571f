package dispatch_test

import (
	"context"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
)

type wantSink struct{ w dispatch.Wants }

func (s wantSink) Wants() dispatch.Wants  { return s.w }
func (s wantSink) Notify(dispatch.Notice) {}

func TestNoticesInContext(t *testing.T) {
	ctx := context.Background()
	if dispatch.NoticesOf(ctx) != nil || dispatch.WithNotices(ctx, nil) != ctx {
		t.Fatal("a context without a sink has one")
	}
	s := wantSink{dispatch.Wants{Progress: true}}
	if got := dispatch.NoticesOf(dispatch.WithNotices(ctx, s)); got != s {
		t.Fatalf("NoticesOf = %v, want the sink put there", got)
	}
}

func TestWantsAllows(t *testing.T) {
	progress := dispatch.Notice{Progress: &dispatch.Progress{Progress: 1}}
	logAt := func(l dispatch.LogLevel) dispatch.Notice { return dispatch.Notice{Log: &dispatch.LogMessage{Level: l}} }
	none := dispatch.Wants{}
	if none.Any() || none.Allows(progress) || none.Allows(logAt(dispatch.LogEmergency)) {
		t.Fatal("the zero Wants allows something")
	}
	w := dispatch.Wants{LogLevel: dispatch.LogWarning}
	if !w.Any() || w.Allows(progress) || w.Allows(logAt(dispatch.LogNotice)) || !w.Allows(logAt(dispatch.LogWarning)) || !w.Allows(logAt(dispatch.LogAlert)) {
		t.Fatal("warning and up: wrong filtering")
	}
	if (dispatch.Wants{Progress: true}).Allows(dispatch.Notice{}) {
		t.Fatal("an empty notice is allowed")
	}
}

func TestLogLevelNames(t *testing.T) {
	for l := dispatch.LogDebug; l <= dispatch.LogEmergency; l++ {
		got, ok := dispatch.ParseLogLevel(l.String())
		if !ok || got != l || !l.Valid() {
			t.Fatalf("level %d (%q) does not round-trip", l, l.String())
		}
	}
	for _, bad := range []string{"", "Info", "warn", "trace"} {
		if _, ok := dispatch.ParseLogLevel(bad); ok {
			t.Fatalf("%q parsed as a level", bad)
		}
	}
	if dispatch.LogNone.Valid() || dispatch.LogLevel(9).Valid() || dispatch.LogLevel(9).String() != "" {
		t.Fatal("a level outside the eight is valid")
	}
}
