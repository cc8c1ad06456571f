package approvalspack_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/approvalspack"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// TestSensitiveArgumentsNeverShown: approvals.get and approvals.list show
// a held call's arguments with its sensitive values redacted, before and
// after it is decided, to its asker and to an admin.
func TestSensitiveArgumentsNeverShown(t *testing.T) {
	ctx := context.Background()
	store, err := approvals.OpenSQLite(ctx, filepath.Join(t.TempDir(), approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a, err := store.Create(ctx, approvals.Request{TokenLabel: "shop", Role: "customer", Scope: "action", UserID: "alice",
		Capability: "account.reset", Args: []byte(`{"id":"a-1","Password":"hunter2"}`), Sensitive: [][]string{{"password"}},
		Risk: registry.RiskDangerous, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, err := approvalspack.New(store)
	if err != nil {
		t.Fatal(err)
	}
	alice := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "alice"}
	admin := dispatch.Principal{Role: "admin", Scope: dispatch.ScopeAdmin, UserID: "ops"}
	look := func(when string) {
		for _, who := range []dispatch.Principal{alice, admin} {
			get, err := p.Invoke(ctx, dispatch.Request{Principal: who, Capability: approvalspack.Get, Args: json.RawMessage(`{"approval_id":"` + a.ID + `"}`)})
			if err != nil {
				t.Fatal(err)
			}
			list, err := p.Invoke(ctx, dispatch.Request{Principal: who, Capability: approvalspack.List, Args: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			for name, out := range map[string]json.RawMessage{approvalspack.Get: get, approvalspack.List: list} {
				if strings.Contains(string(out), "hunter2") || !strings.Contains(string(out), `"id":"a-1"`) {
					t.Errorf("%s, %s as %s: %s; want the arguments with the password redacted", when, name, who.Role, out)
				}
			}
		}
	}
	look("pending")
	if _, err := store.Decide(ctx, a.ID, approvals.Decision{By: "admin", ByUser: "ops", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	look("rejected")
}
