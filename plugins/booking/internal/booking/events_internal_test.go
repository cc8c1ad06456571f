package booking

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store/sqlite"
	"github.com/capgate/capgate/sdk"
)

// TestPublishFailureNeverFailsTheCall runs the service with the SDK's own
// publisher outside a host, where every publish fails with sdk.ErrNoHost:
// seeding, booking and cancelling still succeed, and each failure is logged.
func TestPublishFailureNeverFailsTheCall(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), DBFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logs bytes.Buffer
	s := NewService(st, func() time.Time { return now }, slog.New(slog.NewTextHandler(&logs, nil)))
	s.SetPublisher(sdk.Env{}.Publish)
	if applied, err := s.Seed(context.Background(), SeedDemo); err != nil || !applied {
		t.Fatalf("Seed = %v, %v", applied, err)
	}
	b, err := s.Create(context.Background(), carol, CreateIn{ResourceID: "room-borealis", Start: "2030-01-08T10:30:00Z"})
	if err != nil {
		t.Fatalf("Create with a failing publisher: %v", err)
	}
	if _, err := s.Cancel(context.Background(), carol, IDIn{ID: b.ID}); err != nil {
		t.Fatalf("Cancel with a failing publisher: %v", err)
	}
	out := logs.String()
	for _, typ := range []string{"catalogue.upsert", "booking.created", "booking.cancelled"} {
		if !strings.Contains(out, "publishing an event failed") || !strings.Contains(out, "type="+typ) {
			t.Errorf("no logged publish failure for %s in:\n%s", typ, out)
		}
	}
	if !strings.Contains(out, sdk.ErrNoHost.Error()) {
		t.Errorf("log does not give the reason %q:\n%s", sdk.ErrNoHost, out)
	}
}
