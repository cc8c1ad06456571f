package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// TestApprovalPagesShowNoSecret: the approvals list and a held call's
// page show its arguments with the sensitive values redacted, pending
// and once decided; a session bound to no user, or to the asker's user
// written otherwise, cannot decide it.
func TestApprovalPagesShowNoSecret(t *testing.T) {
	r := newRig(t)
	a, err := r.store.Create(context.Background(), approvals.Request{TokenLabel: "shop", Role: "customer", Scope: "action", UserID: "alice",
		Capability: "account.reset", Args: []byte(`{"id":"a-1","Password":"hunter2"}`), Sensitive: [][]string{{"password"}},
		Risk: registry.RiskDangerous, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ops := r.signIn(adminToken)
	look := func(when string) {
		for _, target := range []string{"/admin/approvals", "/admin/approvals?status=any", "/admin/approvals/" + a.ID} {
			rec := r.do(req{target: target, cookie: ops})
			if body := rec.Body.String(); rec.Code != http.StatusOK || strings.Contains(body, "hunter2") {
				t.Errorf("%s, %s: %d; the page shows the password", when, target, rec.Code)
			}
		}
		if body := r.do(req{target: "/admin/approvals/" + a.ID, cookie: ops}).Body.String(); !strings.Contains(body, "[redacted]") {
			t.Errorf("%s: the held call's page does not show the arguments redacted", when)
		}
	}
	look("pending")

	// An admin session bound to no user, or to the asker in another
	// case, decides nothing.
	for label, user := range map[string]string{"nobody-admin": "", "alice-upper": "ALICE"} {
		r.book.set(Account{Label: label, Scope: dispatch.ScopeAdmin, TokenSHA256: tokenSHA256(label + "-token")})
		r.book.mu.Lock()
		r.book.roles[label], r.book.users[label] = "admin", user
		r.book.mu.Unlock()
		s := r.signIn(label + "-token")
		want := "may not be decided by the user who made it"
		if user == "" {
			want = "bound to none"
		}
		wantBody(t, r.do(req{method: "POST", target: "/admin/approvals/" + a.ID + "/approve", form: url.Values{"csrf": {r.csrfOf(s)}}, cookie: s}),
			http.StatusForbidden, want)
	}
	if _, err := r.store.Decide(context.Background(), a.ID, approvals.Decision{By: "ops", ByUser: "ops", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	look("rejected")
}
