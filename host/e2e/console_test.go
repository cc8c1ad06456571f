package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// chromiumPath is Debian's Chromium, which the browser test drives.
const chromiumPath = "/usr/bin/chromium"

// consoleChecks are the checks js/console.mjs reports, every one of which
// must be there and true.
var consoleChecks = []string{
	"unsignedGoesToSignIn", "wrongTokenRefused", "nonAdminTokenRefusedAlike", "signedInAndBack",
	"cookieHttpOnlyStrict", "cookieHoldsNoToken", "overviewCountsPending", "capabilityFound",
	"capabilityShowsItsRisk", "pluginsRunning", "tokensMasked", "heldCallListed", "approvedFlash",
	"approvedCallRan", "outcomeInAuditTrail", "confirmationAsked", "switchedOff",
	"actionRefusedAtKillSwitch", "refusalInLiveTail", "signedOut", "cookieCleared",
	"pagesNeedSignInAgain", "nothingFetchedElsewhere", "noPageErrors",
}

// adminLabel is the label the test config's admin token gets: it sets
// none, so it is tokens-N by its place in the file.
const adminLabel = "tokens-5"

// TestAdminConsoleInABrowser drives the admin console in headless
// Chromium (js/console.mjs): sign in, find booking.cancel, approve
// alice's held cancel and see it run in the audit trail, switch actions
// off and see her next action refused in the live tail, sign out. Then it
// checks from outside what the browser did: the booking is cancelled, the
// decision and the switch are the admin token's, in the trail.
// CAPGATE_CONSOLE_SCREENSHOTS=DIR keeps a screenshot of each page there
// (docs/console holds the ones the docs show).
func TestAdminConsoleInABrowser(t *testing.T) {
	needE2E(t)
	if _, err := os.Stat(chromiumPath); err != nil {
		msg := chromiumPath + " missing: install Debian's chromium (apt-get install chromium) to run the browser test"
		if inCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	nodeBin(t)
	h := startHostWith(t, t.TempDir(), "{seed: demo}", func(cfg string) string {
		return cfg + "risk: {capabilities: {booking.cancel: dangerous}}\n"
	})

	alice := connect(t, h, tokenAlice, "2025-11-25")
	mine := listBookings(t, alice, "alice")
	if len(mine) == 0 {
		t.Fatal("alice has no booking; the demo seed gives her two")
	}
	var held struct {
		Status     string `json:"status"`
		ApprovalID string `json:"approval_id"`
	}
	callTool(t, alice, "booking.cancel", map[string]any{"id": mine[0].ID}).mustSucceed(t, "a dangerous cancel", &held)
	if held.Status != "pending_approval" || held.ApprovalID == "" {
		t.Fatalf("booking.cancel at dangerous answered %+v; want a pending approval", held)
	}

	args := []string{"console.mjs", "--url", h.base, "--admin-token", tokenAdmin, "--caller-token", tokenAlice,
		"--approval", held.ApprovalID, "--capability", "booking.cancel", "--chromium", chromiumPath}
	if dir := os.Getenv("CAPGATE_CONSOLE_SCREENSHOTS"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--screenshots", abs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stdout, err := runNode(t, ctx, args...)
	if err != nil {
		t.Fatalf("console.mjs: %v; stdout:\n%s", err, stdout)
	}
	var report struct {
		Checks      map[string]bool            `json:"checks"`
		Seen        map[string]json.RawMessage `json:"seen"`
		Error       string                     `json:"error"`
		Screenshots []string                   `json:"screenshots"`
	}
	if err := json.Unmarshal(stdout, &report); err != nil {
		t.Fatalf("console.mjs output is not its report: %v\n%s", err, stdout)
	}
	if report.Error != "" {
		t.Errorf("console.mjs stopped: %s", report.Error)
	}
	for _, name := range consoleChecks {
		ok, ran := report.Checks[name]
		switch {
		case !ran:
			t.Errorf("console.mjs did not get to check %s", name)
		case !ok:
			t.Errorf("console.mjs check %s failed; it saw %s", name, report.Seen[name])
		}
	}
	if len(report.Checks) != len(consoleChecks) {
		t.Errorf("console.mjs reported %d checks, want the %d this test knows", len(report.Checks), len(consoleChecks))
	}
	if t.Failed() {
		return
	}

	// What the browser did, seen from outside it.
	if st := statusOf(listBookings(t, alice, "alice"), mine[0].ID); st != "cancelled" {
		t.Errorf("alice's booking %s is %q after the console approved its cancel; want cancelled", mine[0].ID, st)
	}
	var decided struct {
		Status    string `json:"status"`
		DecidedBy string `json:"decided_by"`
		Reason    string `json:"reason"`
	}
	adminJSON(t, h, "/api/v1/admin/approvals/"+held.ApprovalID, &decided)
	if decided.Status != "done" || decided.DecidedBy != adminLabel || decided.Reason != "agreed with the customer" {
		t.Errorf("the held call reads %+v; want done, decided by %s with the reason typed in the console", decided, adminLabel)
	}
	var actions struct {
		Enabled   bool   `json:"enabled"`
		ChangedBy string `json:"changed_by"`
	}
	adminJSON(t, h, "/api/v1/admin/actions", &actions)
	if actions.Enabled || actions.ChangedBy != adminLabel {
		t.Errorf("the kill switch reads %+v; want off, set by %s", actions, adminLabel)
	}
	var trail struct {
		Records []struct {
			Capability string `json:"capability"`
			TokenLabel string `json:"token_label"`
			Reason     string `json:"reason"`
			Protocol   string `json:"protocol"`
		} `json:"records"`
	}
	adminJSON(t, h, "/api/v1/admin/audit?capability=capgate.actions", &trail)
	if !slices.ContainsFunc(trail.Records, func(r struct {
		Capability string `json:"capability"`
		TokenLabel string `json:"token_label"`
		Reason     string `json:"reason"`
		Protocol   string `json:"protocol"`
	}) bool {
		return r.TokenLabel == adminLabel && r.Reason == "actions off"
	}) {
		t.Errorf("no capgate.actions record of %s switching actions off: %+v", adminLabel, trail.Records)
	}
	if strings.Contains(h.fullLog(), tokenAdmin) {
		t.Errorf("the host's log holds the admin token's secret")
	}
}

// adminJSON GETs an admin API path as the admin token and decodes it.
func adminJSON(t *testing.T, h *host, path string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenAdmin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
