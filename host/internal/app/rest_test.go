package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/audit/audittest"
)

// restDo sends one REST request and returns its status, headers and body.
func restDo(t *testing.T, method, url, token, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// TestRESTOnRealHost: over a host with the booking plugin, the REST
// adapter lists what tools/list lists, answers a result with the bytes
// MCP's structuredContent carries, holds a dangerous call for approval
// (202) that approvals.get then follows, refuses another user's booking
// before any approval is asked, replays an idempotent action across both
// protocols, serves an OpenAPI document that describes its real answers,
// and audits each call as REST with the client's request id.
func TestRESTOnRealHost(t *testing.T) {
	dir := t.TempDir()
	addr, stop := serveSearch(t, approvalsConfig(t, dir, ""), nil)
	base := "http://" + addr + "/api/v1/capabilities"
	const alice, bob = "govern-token-1", "govern-token-2"

	var list struct{ Capabilities []struct{ Name, Risk string } }
	restJSON(t, addr, alice, "/api/v1/capabilities", &list)
	var names []string
	for _, c := range list.Capabilities {
		names = append(names, c.Name)
	}
	if want := listedTools(t, addr, alice); !slices.Equal(names, want) {
		t.Fatalf("REST lists %v, tools/list %v", names, want)
	}

	m := mcpAnswer(t, addr, alice, "booking.list", `{}`, "")
	code, hd, body := restDo(t, http.MethodPost, base+"/booking.list", alice, `{}`, "X-Request-Id", "rest-req-1")
	if code != 200 || hd.Get("Content-Type") != "application/json" || !bytes.Equal(body, m.result) {
		t.Fatalf("booking.list: %d %s\nMCP structuredContent: %s", code, body, m.result)
	}
	bk := aliceBooking(t, addr, alice)

	code, _, body = restDo(t, http.MethodPost, base+"/booking.cancel", bob, mustJSON(bk))
	if code != 403 || !strings.Contains(string(body), `"step":"ownership"`) {
		t.Fatalf("bob cancelling alice's booking: %d %s", code, body)
	}
	code, _, body = restDo(t, http.MethodPost, base+"/booking.cancel", alice, mustJSON(bk))
	var pending struct {
		Status, ApprovalID, Message string
	}
	if err := json.Unmarshal(body, &pending); err != nil || code != 202 || pending.Status != "pending_approval" || !strings.HasPrefix(string(body), `{"status":"pending_approval","approval_id":"ap_`) {
		t.Fatalf("alice cancelling at dangerous: %d %s", code, body)
	}
	var ap struct{ ApprovalID, Status, Capability string }
	code, _, body = restDo(t, http.MethodPost, base+"/approvals.get", alice, `{"approval_id":"`+approvalID(t, body)+`"}`)
	if json.Unmarshal(body, &ap); code != 200 || ap.Status != "pending" || ap.Capability != "booking.cancel" {
		t.Fatalf("approvals.get: %d %s", code, body)
	}

	// One key, both protocols: the first call runs, the others replay it.
	day := time.Now().UTC().AddDate(0, 0, 2).Format("2006-01-02")
	create := `{"resource_id":"room-aurora","start":"` + day + `T10:00:00Z"}`
	code, _, first := restDo(t, http.MethodPost, base+"/booking.create", alice, create, "Idempotency-Key", `"create-aurora"`)
	if code != 200 || !strings.Contains(string(first), `"status":"active"`) {
		t.Fatalf("create: %d %s", code, first)
	}
	if code, _, again := restDo(t, http.MethodPost, base+"/booking.create", alice, create, "Idempotency-Key", "create-aurora"); code != 200 || !bytes.Equal(again, first) {
		t.Fatalf("REST repeat: %d %s, want %s", code, again, first)
	}
	if m := mcpAnswer(t, addr, alice, "booking.create", create, "create-aurora"); m.kind != "result" || !bytes.Equal(m.result, first) {
		t.Fatalf("MCP repeat with the key: %s, want %s", m.raw, first)
	}
	code, _, body = restDo(t, http.MethodPost, base+"/booking.create", alice, strings.Replace(create, "T10", "T11", 1), "Idempotency-Key", "create-aurora")
	if code != 422 || !strings.Contains(string(body), `"code":"invalid_input"`) || !strings.Contains(string(body), "already used for other arguments") {
		t.Fatalf("the key for other arguments: %d %s", code, body)
	}

	// The document of alice's token, from real plugins' schemas, is valid
	// OpenAPI 3.1 and describes what the adapter answers.
	_, _, doc := restDo(t, http.MethodGet, "http://"+addr+"/api/v1/openapi.json", alice, "")
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("invalid document: %v", verrs[0])
	}
	for _, c := range []struct{ name, body string }{{"booking.list", `{}`}, {"booking.resources", `{}`}, {"booking.get", `{"id":"bk_aaaaaaaaaaaa"}`}} {
		req, _ := http.NewRequest(http.MethodPost, base+"/"+c.name, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		code, hd, body := restDo(t, http.MethodPost, base+"/"+c.name, alice, c.body)
		resp := &http.Response{StatusCode: code, Header: hd, Body: io.NopCloser(bytes.NewReader(body)), Request: req}
		if ok, verrs := v.ValidateHttpRequestResponse(req, resp); !ok {
			t.Errorf("%s: %d %s does not match the document: %s %s", c.name, code, body, verrs[0].Message, verrs[0].Reason)
		}
	}

	stop()
	store, err := audit.Open(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	page, err := store.Query(context.Background(), audit.Filter{RequestID: "rest-req-1"})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("records of request rest-req-1: %v %v", page.Records, err)
	}
	if r := page.Records[0]; r.Protocol != "rest" || r.ProtocolVersion != "v1" || r.Capability != "booking.list" || r.UserID != "alice" || r.Outcome != audit.OutcomeOK {
		t.Fatalf("record %+v", r)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func approvalID(t *testing.T, pending []byte) string {
	t.Helper()
	var p struct {
		ApprovalID string `json:"approval_id"`
	}
	if err := json.Unmarshal(pending, &p); err != nil || p.ApprovalID == "" {
		t.Fatalf("no approval id in %s", pending)
	}
	return p.ApprovalID
}

// TestRESTAuditStep: while the audit trail cannot be written, REST refuses
// an action at step audit with 503, as MCP refuses it with -32003, and a
// read carries on over both.
func TestRESTAuditStep(t *testing.T) {
	dir := t.TempDir()
	addr, _ := serveSearch(t, governedConfig(t, dir, ""), nil)
	repair := (&audittest.Env{T: t, Dir: dir}).FailWrites("")
	defer repair()
	for deadline := time.Now().Add(10 * time.Second); step(t, addr, "booking.cancel", cancel) != "audit"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("actions still admitted 10 s after the trail stopped taking records")
		}
	}
	m := mcpAnswer(t, addr, "govern-token-1", "booking.cancel", mustJSON(cancel), "")
	r := restAnswer(t, addr, "govern-token-1", "booking.cancel", mustJSON(cancel), "")
	if why := sameDecision(m, r); why != "" || r.step != "audit" || !strings.HasPrefix(r.raw, "503 ") {
		t.Fatalf("MCP %s\nREST %s (%s)", m.raw, r.raw, why)
	}
	if r := restAnswer(t, addr, "govern-token-1", "booking.list", `{}`, ""); r.kind != "result" {
		t.Fatalf("a read with the trail down: %s", r.raw)
	}
}
