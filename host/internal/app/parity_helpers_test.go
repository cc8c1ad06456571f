package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// answer is one call's decision as one protocol gave it: enough to tell
// whether MCP and REST decided the same.
type answer struct {
	// kind is result, held, refused, tool_error, unknown or internal.
	kind string
	// step and reason are a refusal's.
	step, reason string
	// retryAfterMS is a rate-limit refusal's.
	retryAfterMS int64
	// message is a tool error's, or an internal failure's without its
	// reference.
	message string
	// code is a tool error's code (REST only: MCP does not carry it).
	code string
	// result is the result's bytes: MCP's structuredContent, REST's body.
	result []byte
	// raw is the whole answer, for a failure's message.
	raw string
}

var rpcID atomic.Int64

// failer is what the helpers need of a test: a *testing.T or a
// *rapid.T.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// mcpAnswer calls name over MCP (2025-11-25) as token: args is the raw
// arguments ("" for none), key an idempotency key ("" for none).
func mcpAnswer(t failer, addr, token, name, args, key string) answer {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(rpcID.Add(1), 10) + `,"method":"tools/call","params":{"name":`)
	b.WriteString(strconv.Quote(name))
	if args != "" {
		b.WriteString(`,"arguments":` + args)
	}
	if key != "" {
		b.WriteString(`,"_meta":{"io.capgate/idempotency-key":` + strconv.Quote(key) + `}`)
	}
	b.WriteString(`}}`)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/mcp", strings.NewReader(b.String()))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m struct {
		Result *struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Step         string `json:"step"`
				Reason       string `json:"reason"`
				RetryAfterMS int64  `json:"retry_after_ms"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("MCP %s: %d %s", name, resp.StatusCode, raw)
	}
	a := answer{raw: string(raw)}
	switch {
	case m.Error != nil && m.Error.Code == -32003:
		a.kind, a.step, a.reason, a.retryAfterMS = "refused", m.Error.Data.Step, m.Error.Data.Reason, m.Error.Data.RetryAfterMS
	case m.Error != nil && m.Error.Code == -32602 && strings.Contains(string(raw), "unknown tool"):
		a.kind = "unknown"
	case m.Error != nil || m.Result == nil || len(m.Result.Content) == 0:
		t.Fatalf("MCP %s: unexpected answer %s", name, raw)
	case m.Result.IsError:
		a.kind, a.message = "tool_error", m.Result.Content[0].Text
		if msg, ok := withoutReference(a.message); ok {
			a.kind, a.message = "internal", msg
		}
	default:
		a.kind, a.result = "result", m.Result.StructuredContent
		if a.result == nil {
			// Not an object: the text block carries it.
			a.result = []byte(m.Result.Content[0].Text)
		}
		if isHeld(a.result) {
			a.kind = "held"
		}
	}
	return a
}

// restAnswer calls name over REST as token: args is the body ("" for
// none), key an Idempotency-Key ("" for none).
func restAnswer(t failer, addr, token, name, args, key string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/capabilities/"+name, strings.NewReader(args))
	req.Header.Set("Authorization", "Bearer "+token)
	if args != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", strconv.Quote(key))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{raw: fmt.Sprintf("%d %s", resp.StatusCode, raw)}
	switch resp.StatusCode {
	case 200:
		a.kind, a.result = "result", raw
		return a
	case 202:
		if !isHeld(raw) {
			t.Fatalf("REST %s: 202 without a pending approval: %s", name, raw)
		}
		a.kind, a.result = "held", raw
		return a
	}
	var p struct {
		Status       int    `json:"status"`
		Detail       string `json:"detail"`
		Step         string `json:"step"`
		Reason       string `json:"reason"`
		Code         string `json:"code"`
		RetryAfterMS int64  `json:"retry_after_ms"`
		Reference    string `json:"reference"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.Status != resp.StatusCode || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("REST %s: not a problem: %d %s", name, resp.StatusCode, raw)
	}
	switch {
	case p.Step != "":
		a.kind, a.step, a.reason, a.retryAfterMS = "refused", p.Step, p.Reason, p.RetryAfterMS
		want := map[string]int{"rate_limit": 429, "audit": 503}[p.Step]
		if want == 0 {
			want = 403
		}
		if resp.StatusCode != want || (p.Step == "rate_limit") != (resp.Header.Get("Retry-After") != "") {
			t.Fatalf("REST %s: refusal at %s answered %d (Retry-After %q)", name, p.Step, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	case resp.StatusCode == 404:
		a.kind = "unknown"
	case p.Code != "":
		a.kind, a.message, a.code = "tool_error", p.Detail, p.Code
		if want := map[bool]int{true: 503, false: 422}[p.Code == "unavailable"]; resp.StatusCode != want {
			t.Fatalf("REST %s: tool error %s answered %d", name, p.Code, resp.StatusCode)
		}
	case p.Reference != "":
		msg, _ := withoutReference(p.Detail)
		a.kind, a.message = "internal", msg
	default:
		t.Fatalf("REST %s: unexpected problem %s", name, raw)
	}
	return a
}

// withoutReference is an internal failure's message without the
// reference that names it, which differs from call to call.
func withoutReference(msg string) (string, bool) {
	i := strings.LastIndex(msg, " (reference ")
	if i < 0 || !strings.HasSuffix(msg, ")") {
		return msg, false
	}
	return msg[:i], true
}

// isHeld reports whether a result is a held call's pending approval.
func isHeld(res []byte) bool {
	var p struct {
		Status     string `json:"status"`
		ApprovalID string `json:"approval_id"`
	}
	return json.Unmarshal(res, &p) == nil && p.Status == "pending_approval" && p.ApprovalID != ""
}

// heldShape is a pending result without what differs between two held
// calls: their approval's id and expiry.
func heldShape(res []byte) string {
	var m map[string]any
	_ = json.Unmarshal(res, &m)
	m["approval_id"], m["expires_at"] = "…", "…"
	b, _ := json.Marshal(m)
	return string(b)
}

// sameDecision says why a and b (MCP's and REST's answer to the same
// call) are not the same decision, or "" when they are. Two rate-limit
// refusals made a moment apart may say a retry time a second apart, and
// two held calls are two approvals.
func sameDecision(a, b answer) string {
	if a.kind != b.kind {
		return "kinds differ: " + a.kind + " / " + b.kind
	}
	switch a.kind {
	case "refused":
		ra, rb := a.reason, b.reason
		if a.step == "rate_limit" {
			ra, _, _ = strings.Cut(ra, "; retry in ")
			rb, _, _ = strings.Cut(rb, "; retry in ")
			if d := a.retryAfterMS - b.retryAfterMS; d < -1500 || d > 1500 || (a.retryAfterMS == 0) != (b.retryAfterMS == 0) {
				return fmt.Sprintf("retry_after_ms %d / %d", a.retryAfterMS, b.retryAfterMS)
			}
		}
		if a.step != b.step || ra != rb {
			return "refusals differ"
		}
	case "tool_error", "internal":
		if a.message != b.message {
			return "messages differ"
		}
	case "result":
		if !bytes.Equal(a.result, b.result) {
			return "results differ"
		}
	case "held":
		if heldShape(a.result) != heldShape(b.result) || bytes.Equal(a.result, b.result) {
			return "held results differ, or name one approval"
		}
	}
	return ""
}
