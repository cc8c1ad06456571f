package subscription

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store/sqlite"
	"github.com/capgate/capgate/sdk"
)

// TestPublishFailureNeverFailsTheCall runs the service with the SDK's own
// publisher outside a host, where every publish fails with sdk.ErrNoHost:
// seeding, subscribing and cancelling still succeed, and each failure is
// logged.
func TestPublishFailureNeverFailsTheCall(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), DBFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logs bytes.Buffer
	now := time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)
	s := NewService(st, func() time.Time { return now }, slog.New(slog.NewTextHandler(&logs, nil)))
	s.SetPublisher(sdk.Env{}.Publish)
	if applied, err := s.Seed(context.Background(), SeedDemo); err != nil || !applied {
		t.Fatalf("Seed = %v, %v", applied, err)
	}
	carol := sdk.Call{Principal: sdk.Principal{Scope: "action", UserID: "carol"}}
	sub, err := s.Subscribe(context.Background(), carol, SubscribeIn{PlanID: "pro-monthly"})
	if err != nil {
		t.Fatalf("Subscribe with a failing publisher: %v", err)
	}
	if _, err := s.Cancel(context.Background(), carol, CancelIn{ID: sub.ID}); err != nil {
		t.Fatalf("Cancel with a failing publisher: %v", err)
	}
	out := logs.String()
	for _, typ := range []string{"catalogue.upsert", "subscription.started", "subscription.cancelled"} {
		if !strings.Contains(out, "publishing an event failed") || !strings.Contains(out, "type="+typ) {
			t.Errorf("no logged publish failure for %s in:\n%s", typ, out)
		}
	}
	if !strings.Contains(out, sdk.ErrNoHost.Error()) {
		t.Errorf("log does not give the reason %q:\n%s", sdk.ErrNoHost, out)
	}
}

// TestSubscribeRetriesOnIDCollision: a colliding random id is retried with
// a new one, and a source that only collides fails after idAttempts.
func TestSubscribeRetriesOnIDCollision(t *testing.T) {
	s, _ := seededService(t)
	taken := "sub_aaaaaaaaaaaa"
	ids := []string{taken, taken, "sub_bbbbbbbbbbbb"}
	s.newID = func() string { id := ids[0]; ids = ids[1:]; return id }
	carol := sdk.Call{Principal: sdk.Principal{Scope: "action", UserID: "carol"}}
	if _, err := s.Subscribe(context.Background(), carol, SubscribeIn{PlanID: "pro-monthly"}); err != nil {
		t.Fatal(err) // takes sub_aaaaaaaaaaaa
	}
	got, err := s.Subscribe(context.Background(), carol, SubscribeIn{PlanID: "pro-yearly"})
	if err != nil || got.ID != "sub_bbbbbbbbbbbb" {
		t.Fatalf("Subscribe after a collision = %+v, %v; want sub_bbbbbbbbbbbb", got, err)
	}
	s.newID = func() string { return taken }
	if _, err := s.Subscribe(context.Background(), carol, SubscribeIn{PlanID: "student-monthly"}); err == nil || !strings.Contains(err.Error(), "id already exists") {
		t.Fatalf("Subscribe with an always-colliding id source = %v; want the duplicate id error", err)
	}
}

func TestSeedUnknownName(t *testing.T) {
	s := NewService(nil, time.Now, nil)
	if _, err := s.Seed(context.Background(), "prod"); err == nil || !strings.Contains(err.Error(), `unknown seed "prod"`) {
		t.Fatalf("Seed(prod) = %v", err)
	}
}
