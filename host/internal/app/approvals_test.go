package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/sdk/pgtest"
)

// TestApprovedCallRunsOnce: a dangerous call answers a pending result and
// runs nothing; approved (here in the store, as the CLI or another
// replica would), the host runs it once through the whole gate, as its
// asker, and records what came of it.
func TestApprovedCallRunsOnce(t *testing.T) {
	dir := t.TempDir()
	addr, _ := serveSearch(t, approvalsConfig(t, dir, ""), nil)

	out, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", aliceBooking(t, addr, "govern-token-1"))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("booking.cancel at dangerous: %v %q; want a pending result", out, msg)
	}
	id, _ := out["approval_id"].(string)
	if !strings.HasPrefix(id, "ap_") || out["expires_at"] == "" || !strings.Contains(out["message"].(string), "has not run") {
		t.Fatalf("pending result %v", out)
	}

	// The agent follows its call; another user's token finds nothing.
	if got, msg := mcpTool(t, addr, "govern-token-1", "approvals.get", map[string]any{"approval_id": id}); msg != "" || got["status"] != "pending" || got["capability"] != "booking.cancel" {
		t.Fatalf("approvals.get: %v %q", got, msg)
	}
	if _, msg := mcpTool(t, addr, "govern-token-2", "approvals.get", map[string]any{"approval_id": id}); !strings.Contains(msg, "no approval request") {
		t.Fatalf("bob reading alice's request: %q; want not found", msg)
	}
	if got, msg := mcpTool(t, addr, "govern-token-2", "approvals.list", map[string]any{}); msg != "" || len(got["approvals"].([]any)) != 0 {
		t.Fatalf("bob's list: %v %q; want empty", got, msg)
	}
	if got, msg := mcpTool(t, addr, "govern-token-1", "approvals.list", map[string]any{"status": "pending"}); msg != "" || len(got["approvals"].([]any)) != 1 {
		t.Fatalf("alice's pending list: %v %q", got, msg)
	}

	ctx := context.Background()
	store, err := approvals.OpenSQLite(ctx, filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	held, err := store.Get(ctx, id)
	if err != nil || held.Status != approvals.Pending || held.TokenLabel != "tokens-0" || held.UserID != "alice" ||
		held.Capability != "booking.cancel" || !strings.HasPrefix(string(held.Args), `{"id":"bk_`) {
		t.Fatalf("held %+v, %v", held, err)
	}
	if _, err := store.Decide(ctx, id, approvals.Decision{Approve: true, By: "ops", ByUser: "alice"}); err == nil {
		t.Fatal("alice approved her own call")
	}
	if _, err := store.Decide(ctx, id, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	var done approvals.Approval
	for {
		if done, err = store.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
		if done.Status == approvals.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approved call still %s after 15 s", done.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if done.Outcome.Kind != approvals.OutcomeResult || !strings.Contains(string(done.Outcome.Result), `"cancelled"`) {
		t.Fatalf("outcome %+v; want the cancelled booking", done.Outcome)
	}
	if _, taken, _ := store.Start(ctx, id); taken {
		t.Fatal("a finished approved call was taken to run again")
	}
	got, msg := mcpTool(t, addr, "govern-token-1", "approvals.get", map[string]any{"approval_id": id})
	outcome, _ := got["outcome"].(map[string]any)
	if msg != "" || got["status"] != "done" || got["decided_by"] != "ops" || outcome["kind"] != "result" {
		t.Fatalf("approvals.get once run: %v %q", got, msg)
	}
}

// approvalsConfig is a host holding booking.cancel for approval, with
// alice's and bob's tokens (govern-token-1 and -2) and the booking,
// approvals and events packs; dsn, when set, is the database replicas
// share (the booking plugin's too). admins, when given, adds tokens (YAML
// list items, labelled tokens-1 on) and roles (map entries) of their own.
func approvalsConfig(t *testing.T, dataDir, dsn string, admins ...string) *config.Config {
	t.Helper()
	db, plugin := "", "{seed: demo}"
	if dsn != "" {
		db, plugin = fmt.Sprintf("database: {dsn: %q}", dsn), fmt.Sprintf("{seed: demo, dsn: %q}", dsn)
	}
	tokens, roles := "", ""
	if len(admins) == 2 {
		tokens, roles = admins[0], ", "+admins[1]
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
%s
tokens:
  - {token: govern-token-1, role: r, scope: action, user_id: alice}
%s
  - {token: govern-token-2, role: r, scope: action, user_id: bob}
roles: {r: [booking.read, booking.write, catalogue.read, events.read]%s}
packs: {booking: true, approvals: true, events: true}
plugins: [{name: booking, path: %s, config: %s}]
risk: {capabilities: {booking.cancel: dangerous}}
`, dataDir, db, tokens, roles, bookingBin, plugin)), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// waitDone waits for the request id to have run.
func waitDone(t *testing.T, store *approvals.Store, id string) approvals.Approval {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		a, err := store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status == approvals.Done {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("approved call still %s after 15 s", a.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestApprovalOutlivesItsHost: a call approved while no host runs (the
// host stopped between the request and the decision) runs once the next
// host starts on the same database.
func TestApprovalOutlivesItsHost(t *testing.T) {
	dir := t.TempDir()
	addr, stop := serveSearch(t, approvalsConfig(t, dir, ""), nil)
	out, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", aliceBooking(t, addr, "govern-token-1"))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("held call: %v %q", out, msg)
	}
	id := out["approval_id"].(string)
	stop()

	ctx := context.Background()
	store, err := approvals.OpenSQLite(ctx, filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Decide(ctx, id, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); err != nil {
		t.Fatal(err)
	}
	serveSearch(t, approvalsConfig(t, dir, ""), nil)
	if done := waitDone(t, store, id); done.Outcome.Kind != approvals.OutcomeResult {
		t.Fatalf("outcome %+v; want the plugin's answer", done.Outcome)
	}
}

// TestApprovalRunsOnceAcrossReplicas: two replicas on one PostgreSQL
// database, twenty approvers racing: one decision takes effect, and the
// call runs once, in one replica, as the shared audit trail shows.
func TestApprovalRunsOnceAcrossReplicas(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	first, _ := serveSearch(t, approvalsConfig(t, t.TempDir(), dsn), nil)
	serveSearch(t, approvalsConfig(t, t.TempDir(), dsn), nil)
	out, msg := mcpTool(t, first, "govern-token-1", "booking.cancel", aliceBooking(t, first, "govern-token-1"))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("held call: %v %q", out, msg)
	}
	id := out["approval_id"].(string)

	ctx := context.Background()
	var stores []*approvals.Store
	for range 2 {
		s, err := approvals.OpenPostgres(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	var (
		wg   sync.WaitGroup
		wins atomic.Int32
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := stores[i%2].Decide(ctx, id, approvals.Decision{Approve: true, By: fmt.Sprint("ops-", i), ByUser: fmt.Sprint("ops-", i)}); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, approvals.ErrDecided) {
				t.Errorf("approver %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d of 20 approvals took effect; want 1", wins.Load())
	}
	waitDone(t, stores[0], id)

	trail, err := audit.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer trail.Close()
	// Both replicas poll every second: give a second run, were there one,
	// time to reach the trail (the writer flushes within 200 ms).
	time.Sleep(2500 * time.Millisecond)
	page, err := trail.Query(ctx, audit.Filter{Capability: "booking.cancel", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, r := range page.Records {
		if r.Protocol == "approval" && r.RequestID == id {
			runs++
		}
	}
	if runs != 1 {
		t.Fatalf("the approved call ran %d times across the replicas; want once (records %+v)", runs, page.Records)
	}
}

// adminCall sends one admin API request and returns its status and body.
func adminCall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestAdminApprovalsAPI: admin-scope tokens list and read held calls;
// deciding needs a role holding approvals.decide; a decision made twice
// conflicts; outsiders get the flat 404.
func TestAdminApprovalsAPI(t *testing.T) {
	dir := t.TempDir()
	addr, _ := serveSearch(t, approvalsConfig(t, dir, "",
		"  - {token: approver-token, role: ops, scope: admin, user_id: ops}\n  - {token: auditor-token, role: auditor, scope: admin, user_id: carol}",
		`ops: ["*"], auditor: [booking.read]`), nil)
	out, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", aliceBooking(t, addr, "govern-token-1"))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("held call: %v %q", out, msg)
	}
	id := out["approval_id"].(string)
	base := "http://" + addr + "/api/v1/admin/approvals"

	for _, c := range []struct {
		method, url, token string
		want               int
	}{
		{"GET", base, "", http.StatusNotFound},
		{"GET", base, "not-a-token-at-all", http.StatusNotFound},
		{"GET", base, "govern-token-1", http.StatusForbidden},
		{"POST", base + "/" + id + "/approve", "auditor-token", http.StatusForbidden},
		{"POST", base + "/" + id + "/grant", "approver-token", http.StatusNotFound},
		{"POST", base + "/ap_none/approve", "approver-token", http.StatusNotFound},
		{"GET", base + "?colour=red", "approver-token", http.StatusBadRequest},
	} {
		if code, body := adminCall(t, c.method, c.url, c.token, ""); code != c.want {
			t.Errorf("%s %s as %q: %d %v; want %d", c.method, c.url, c.token, code, body, c.want)
		}
	}
	code, list := adminCall(t, "GET", base+"?status=pending", "auditor-token", "")
	if items, _ := list["approvals"].([]any); code != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["approval_id"] != id {
		t.Fatalf("list: %d %v", code, list)
	}
	code, got := adminCall(t, "POST", base+"/"+id+"/approve", "approver-token", `{"reason":"customer asked twice"}`)
	if code != http.StatusOK || got["status"] != "approved" || got["decided_by"] != "tokens-1" || got["reason"] != "customer asked twice" {
		t.Fatalf("approve: %d %v", code, got)
	}
	if code, got := adminCall(t, "POST", base+"/"+id+"/reject", "approver-token", ""); code != http.StatusConflict {
		t.Fatalf("reject after approve: %d %v; want 409", code, got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, got = adminCall(t, "GET", base+"/"+id, "approver-token", "")
		if got["status"] == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if outcome, _ := got["outcome"].(map[string]any); outcome["kind"] != "result" {
		t.Fatalf("outcome %v", got)
	}
	// The trail links the held call, both decisions and the run.
	trail, err := audit.OpenSQLite(context.Background(), filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer trail.Close()
	var linked []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		page, err := trail.Query(context.Background(), audit.Filter{ApprovalID: id, Order: audit.OldestFirst})
		if err != nil {
			t.Fatal(err)
		}
		linked = linked[:0]
		for _, r := range page.Records {
			linked = append(linked, r.Protocol+" "+r.Capability+" "+string(r.Decision)+" "+string(r.Outcome))
		}
		if len(linked) == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(linked)
	want := []string{"admin capgate.approval admitted ok", "admin capgate.approval refused ", "approval booking.cancel admitted ok", "mcp booking.cancel admitted held"}
	if !slices.Equal(linked, want) {
		t.Errorf("records of %s: %q; want %q", id, linked, want)
	}
	// The asker sees the request and the decision on the bus.
	seen := allEvents(t, addr, "govern-token-1")
	for _, want := range []string{"approval.requested/" + id + "/alice", "approval.decided/" + id + "/alice"} {
		if !slices.Contains(seen, want) {
			t.Errorf("events.poll as alice: %v lacks %s", seen, want)
		}
	}
}

// TestApprovedCallRecheckedAtItsRun: an approved call runs as its asker's
// token stands at the run: a token removed by a reload, or whose role no
// longer holds the permission, refuses it, and that is its outcome.
func TestApprovedCallRecheckedAtItsRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	write := func(tokens, roles string) {
		t.Helper()
		body := fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: %s
roles: %s
packs: {booking: true}
plugins: [{name: booking, path: %s, config: {seed: demo}}]
risk: {capabilities: {booking.cancel: dangerous}}
`, dir, tokens, roles, bookingBin)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{token: govern-token-1, label: first, role: r, scope: action, user_id: alice}, {token: govern-token-2, label: second, role: r2, scope: action, user_id: alice}]`,
		`{r: [booking.read, booking.write], r2: [booking.read, booking.write]}`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, addr, _ := serveApp(t, cfg, nil)

	var ids []string
	for _, token := range []string{"govern-token-1", "govern-token-2"} {
		out, msg := mcpTool(t, addr, token, "booking.cancel", aliceBooking(t, addr, token))
		if msg != "" || out["status"] != "pending_approval" {
			t.Fatalf("held call: %v %q", out, msg)
		}
		ids = append(ids, out["approval_id"].(string))
	}
	// The first token goes; the second's role loses booking.write.
	write(`[{token: govern-token-2, label: second, role: r2, scope: action, user_id: alice}]`, `{r: [booking.read, booking.write], r2: [booking.read]}`)
	if _, err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	store, err := approvals.OpenSQLite(context.Background(), filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, id := range ids {
		if _, err := store.Decide(context.Background(), id, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []string{`the token "first" that asked for it is no longer configured`, "refused at step permission"} {
		got := waitDone(t, store, ids[i])
		if got.Outcome.Kind != approvals.OutcomeRefused || !strings.Contains(got.Outcome.Message, want) {
			t.Errorf("request %d: outcome %+v; want refused: %s", i, got.Outcome, want)
		}
	}
}

// aliceBooking is the arguments naming one of alice's seeded bookings.
func aliceBooking(t *testing.T, addr, token string) map[string]any {
	t.Helper()
	out, msg := mcpTool(t, addr, token, "booking.list", map[string]any{})
	if msg != "" {
		t.Fatalf("booking.list: %s", msg)
	}
	list, _ := out["bookings"].([]any)
	if len(list) == 0 {
		t.Fatalf("booking.list: %v; want alice's seeded bookings", out)
	}
	return map[string]any{"id": list[0].(map[string]any)["id"]}
}

// TestNoApprovalForACallTheGateRefuses: the ownership step is asked of
// the plugin alone before a call is held, so another user's booking, or
// one that does not exist, is answered at once, and no one is asked to
// approve it.
func TestNoApprovalForACallTheGateRefuses(t *testing.T) {
	dir := t.TempDir()
	addr, _ := serveSearch(t, approvalsConfig(t, dir, ""), nil)
	alices := aliceBooking(t, addr, "govern-token-1")
	if s := step(t, addr, "booking.cancel", alices); s != "" {
		t.Fatalf("alice's own booking: refused at %s; want it held", s)
	}
	// Checking the owner ran nothing: the booking is still active.
	if got, msg := mcpTool(t, addr, "govern-token-1", "booking.get", alices); msg != "" || got["status"] != "active" {
		t.Fatalf("alice's booking after her held cancellation: %v %q; want it active", got, msg)
	}
	_, e := rpc(t, addr, "govern-token-2", "tools/call", map[string]any{"name": "booking.cancel", "arguments": alices})
	if data, _ := e["data"].(map[string]any); data["step"] != "ownership" {
		t.Fatalf("bob cancelling alice's booking: %v; want the ownership refusal, not a held call", e)
	}
	if _, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", cancel); !strings.Contains(msg, "bk_aaaaaaaaaaaa") {
		t.Fatalf("a booking that does not exist: %q; want not found, not a held call", msg)
	}
	store, err := approvals.OpenSQLite(context.Background(), filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if all, err := store.List(context.Background(), approvals.Filter{}); err != nil || len(all) != 1 {
		t.Fatalf("%d requests stored (%v); want only alice's own", len(all), err)
	}
}

// TestDecisionWithoutABusIsAnnounced: a decision made where there is no
// bus, as capgate approvals reject makes it (on the database alone), is
// announced by the running host within its poll, and only once.
func TestDecisionWithoutABusIsAnnounced(t *testing.T) {
	dir := t.TempDir()
	addr, _ := serveSearch(t, approvalsConfig(t, dir, ""), nil)
	out, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", aliceBooking(t, addr, "govern-token-1"))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("held call: %v %q", out, msg)
	}
	id := out["approval_id"].(string)
	store, err := approvals.OpenSQLite(context.Background(), filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Decide(context.Background(), id, approvals.Decision{By: "ops", ByUser: "ops", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	want := "approval.decided/" + id + "/alice"
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(allEvents(t, addr, "govern-token-1"), want); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("events.poll as alice lacks %s", want)
		}
	}
	// Two more polls of the desk (approvalPoll, a second) find nothing
	// more to announce.
	time.Sleep(2 * time.Second)
	seen := allEvents(t, addr, "govern-token-1")
	if n := len(slices.DeleteFunc(seen, func(e string) bool { return e != want })); n != 1 {
		t.Fatalf("the decision was announced %d times", n)
	}
}

// allEvents is every event token may poll, oldest first.
func allEvents(t *testing.T, addr, token string) []string {
	t.Helper()
	var seen []string
	for after := 0.0; ; {
		page, next := pollEvents(t, addr, token, after)
		if len(page) == 0 {
			return seen
		}
		seen, after = append(seen, page...), next
	}
}
