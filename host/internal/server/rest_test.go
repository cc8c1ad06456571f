package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/problem"
)

func restRequest(t testing.TB, method, url, authz, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	return r
}

// TestRESTHiddenLikeMCP: without a valid token, or with the server
// switched off, every REST route answers every method with the very bytes
// an unknown path gets, as the MCP endpoint does.
func TestRESTHiddenLikeMCP(t *testing.T) {
	methods := []string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut, http.MethodHead, http.MethodOptions, "PROPFIND"}
	paths := []string{RESTCapabilitiesPath, RESTCapabilitiesPath + "/" + mcptest.Search, RESTCapabilitiesPath + "/no.such", RESTOpenAPIPath}
	for _, tc := range []struct {
		name    string
		enabled bool
		authz   string
	}{
		{"no token", true, ""},
		{"malformed", true, "Bearer not a token"},
		{"unknown token", true, "Bearer unknown-token-0123456789"},
		{"switched off, valid token", false, "Bearer " + aliceToken},
	} {
		for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
			f := newFixture(t, func(o *Options) {
				o.Enabled = tc.enabled
				o.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: level}))
			})
			base := f.serve(t)
			get := func(method, path string) []byte {
				req := restRequest(t, method, base+path, tc.authz, `{"query":"x"}`)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("%s %s %s: status %d", tc.name, method, path, resp.StatusCode)
				}
				return dump(t, resp)
			}
			for _, m := range methods {
				mcp, unknown := get(m, MCPPath), get(m, "/api/v1/nothing-here")
				for _, path := range paths {
					if got := get(m, path); !bytes.Equal(got, unknown) || !bytes.Equal(got, mcp) {
						t.Errorf("%s %s %s: answer differs from an unknown path's:\n%s\n---\n%s", tc.name, m, path, got, unknown)
					}
				}
			}
		}
	}
}

// TestRESTThroughServer: an authenticated client lists, calls and reads
// the document through the server, with the principal its token names;
// a method a route does not take is 405 for it, not 404.
func TestRESTThroughServer(t *testing.T) {
	f := newFixture(t, nil)
	base := f.serve(t)
	do := func(method, path, body string) (*http.Response, []byte) {
		resp, err := http.DefaultClient.Do(restRequest(t, method, base+path, "Bearer "+aliceToken, body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := do(http.MethodGet, RESTCapabilitiesPath, "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"booking.cancel"`) || strings.Contains(string(body), `"name":"llm.ask"`) {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	resp, body = do(http.MethodPost, RESTCapabilitiesPath+"/"+mcptest.BookingGet, `{"id":"b-1"}`)
	if resp.StatusCode != 200 || string(body) != `{"id":"b-1","owner":"u-alice","title":"Dentist","cancelled":false}` {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	resp, body = do(http.MethodPost, RESTCapabilitiesPath+"/"+mcptest.BookingGet, `{"id":"b-2"}`)
	var d problem.Details
	if err := json.Unmarshal(body, &d); err != nil || resp.StatusCode != 403 || d.Step != "ownership" {
		t.Fatalf("bob's booking: %d %s", resp.StatusCode, body)
	}
	// A name that needs escaping in a path reaches the gate unescaped.
	resp, body = do(http.MethodPost, RESTCapabilitiesPath+"/no%2Esuch", `{}`)
	if resp.StatusCode != 404 || !strings.Contains(string(body), `no capability is named \"no.such\"`) {
		t.Fatalf("unknown: %d %s", resp.StatusCode, body)
	}
	resp, body = do(http.MethodGet, RESTOpenAPIPath, "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"openapi":"3.1.0"`) || !strings.Contains(string(body), `"version":"9.9.9"`) {
		t.Fatalf("document: %d %.200s", resp.StatusCode, body)
	}
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodDelete, RESTCapabilitiesPath, "GET, HEAD"},
		{http.MethodGet, RESTCapabilitiesPath + "/" + mcptest.Search, "POST"},
		{"PROPFIND", RESTOpenAPIPath, "GET, HEAD"},
	} {
		if resp, body := do(tc.method, tc.path, ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, body)
		}
	}
}

// TestRESTSharesMaxInFlight: MCP and REST requests count against the one
// http.max_in_flight; a REST request over it is 503 with Retry-After, as
// a problem.
func TestRESTSharesMaxInFlight(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxInFlight = 1 })
	f.platform.SlowRelease = make(chan struct{})
	f.platform.SlowStarted = make(chan struct{}, 1)
	base := f.serve(t)
	done := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+MCPPath, "Bearer "+adminToken, callBody(mcptest.Slow, `{}`)))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-f.platform.SlowStarted
	resp, err := http.DefaultClient.Do(restRequest(t, http.MethodPost, base+RESTCapabilitiesPath+"/"+mcptest.Search, "Bearer "+aliceToken, `{"query":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != problem.MediaType ||
		!strings.Contains(string(body), "server busy: 1 requests in flight (http.max_in_flight)") {
		t.Errorf("REST while busy: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	close(f.platform.SlowRelease)
	if code := <-done; code != 200 {
		t.Errorf("slow call = %d", code)
	}
	resp, err = http.DefaultClient.Do(restRequest(t, http.MethodPost, base+RESTCapabilitiesPath+"/"+mcptest.Search, "Bearer "+aliceToken, `{"query":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("REST once the slot came back: %d", resp.StatusCode)
	}
}

// TestRESTOAuthLikeMCP: with OAuth configured, the REST routes answer a
// missing or refused token exactly as the MCP endpoint does (401 or 403
// with the same challenge and body), and an access token OAuth accepts
// calls through the gate as its principal.
func TestRESTOAuthLikeMCP(t *testing.T) {
	f := newOAuthFixture(t, nil)
	for _, authz := range []string{"", "Basic YWxpY2U6cw==", "Bearer not-a-configured-token", "Bearer " + f.robot(t, "profile", oauthResource)} {
		want := f.do(t, mcpRequest(t, http.MethodPost, MCPPath, authz, listBody))
		for _, r := range []*http.Request{
			restRequest(t, http.MethodGet, RESTCapabilitiesPath, authz, ""),
			restRequest(t, http.MethodPost, RESTCapabilitiesPath+"/"+mcptest.BookingGet, authz, `{"id":"b-1"}`),
			restRequest(t, http.MethodGet, RESTOpenAPIPath, authz, ""),
		} {
			got := f.do(t, r)
			if want.Code != 401 && want.Code != 403 || got.Code != want.Code ||
				got.Header().Get("WWW-Authenticate") != want.Header().Get("WWW-Authenticate") || got.Body.String() != want.Body.String() {
				t.Errorf("%q %s: %d %q %s\nMCP: %d %q %s", authz, r.URL.Path, got.Code, got.Header().Get("WWW-Authenticate"), got.Body,
					want.Code, want.Header().Get("WWW-Authenticate"), want.Body)
			}
		}
	}
	alice := "Bearer " + f.alice(t, "openid capgate:action")
	rec := f.do(t, restRequest(t, http.MethodPost, RESTCapabilitiesPath+"/"+mcptest.BookingGet, alice, `{"id":"b-1"}`))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Dentist") {
		t.Fatalf("alice's access token, her booking: %d %s", rec.Code, rec.Body)
	}
	rec = f.do(t, restRequest(t, http.MethodPost, RESTCapabilitiesPath+"/"+mcptest.BookingGet, alice, `{"id":"b-2"}`))
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), `"step":"ownership"`) {
		t.Fatalf("alice's access token, bob's booking: %d %s", rec.Code, rec.Body)
	}
}
