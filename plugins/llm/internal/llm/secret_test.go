package llm_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk"
)

// longKey has the 40 characters of a real provider key.
const longKey = "sk-proj-Q7vX2mLp9RtZ4wYb8NcK1dHf6JsGa3Ue"

// runsOf reports the 8-character runs of secret found in s, in any case,
// so a test can say exactly what leaked.
func runsOf(secret, s string) []string {
	var found []string
	low := strings.ToLower(s)
	sec := strings.ToLower(secret)
	for i := 0; i+8 <= len(sec); i++ {
		if strings.Contains(low, sec[i:i+8]) {
			found = append(found, sec[i:i+8])
		}
	}
	return found
}

// A provider refusing a request quotes most of the key it was sent (36 of
// its 40 characters here, as providers print a wrong key "sk-pr…3Ue"): for
// every 4xx, the agent gets a fixed message with the status, and the log
// the status and nothing of the body.
func TestProviderErrorTextWithheldFor4xx(t *testing.T) {
	quoted := longKey[2:38]
	for _, tc := range []struct {
		status int
		code   sdk.ErrorCode
		want   string
	}{
		{400, sdk.CodeConflict, `"test" refused the request (HTTP 400 Bad Request); the provider's message is withheld`},
		{401, sdk.CodeConflict, `"test" refused its credentials (HTTP 401)`},
		{403, sdk.CodeConflict, `"test" refused its credentials (HTTP 403)`},
		{404, sdk.CodeConflict, `"test" does not know model "test-model"`},
		{408, sdk.CodeConflict, `"test" timed out the request (HTTP 408, 1 attempt)`},
		{409, sdk.CodeConflict, `"test" refused the request (HTTP 409 Conflict)`},
		{422, sdk.CodeConflict, `"test" refused the request (HTTP 422 Unprocessable Entity)`},
		{429, sdk.CodeConflict, `"test" is rate limited (HTTP 429, 1 attempt)`},
		{499, sdk.CodeConflict, `"test" refused the request (HTTP 499 client error)`},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			const body = "Incorrect API key provided: "
			r := newRig(t, rigOpts{conn: map[string]any{"api_key": longKey, "max_retries": 0},
				handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
						"message": body + quoted, "type": "invalid_request_error", "code": "key-" + quoted,
					}})
				}})
			raw, te, err := r.invoke(context.Background(), map[string]any{"question": "Which room has a projector?"})
			if err != nil || te == nil {
				t.Fatalf("got %s / %v / %v; want a tool error", raw, te, err)
			}
			if te.Code != tc.code || !strings.Contains(te.Message, tc.want) {
				t.Errorf("error = %v; want %s containing %q", te, tc.code, tc.want)
			}
			logs := r.logs.String()
			for what, s := range map[string]string{"result": string(raw), "error": te.Message, "log": logs} {
				if l := runsOf(longKey, s); len(l) > 0 {
					t.Errorf("the %s holds runs of the key %q: %s", what, l, s)
				}
			}
			if strings.Contains(te.Message, "Incorrect API key") || strings.Contains(logs, "Incorrect API key") {
				t.Errorf("the provider's words were passed on:\n%s\n%s", te.Message, logs)
			}
			if !strings.Contains(logs, "status="+strconv.Itoa(tc.status)) {
				t.Errorf("the log does not record the status: %s", logs)
			}
		})
	}
}

// A server error's message is still logged for the operator, masked: the
// key's runs, upper-cased too, are gone and the rest remains.
func TestProviderServerErrorLoggedMasked(t *testing.T) {
	r := newRig(t, rigOpts{conn: map[string]any{"api_key": longKey, "max_retries": 0},
		handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(502)
			_, _ = w.Write([]byte(`{"error":{"message":"upstream said ` + strings.ToUpper(longKey[1:37]) + ` is bad"}}`))
		}})
	_, te, err := r.invoke(context.Background(), map[string]any{"question": "Which room has a projector?"})
	if err != nil || te == nil || !strings.Contains(te.Message, `"test" failed (HTTP 502, 1 attempt)`) {
		t.Fatalf("got %v / %v", te, err)
	}
	logs := r.logs.String()
	if l := runsOf(longKey, logs); len(l) > 0 {
		t.Errorf("the log holds runs of the key %q: %s", l, logs)
	}
	if !strings.Contains(logs, `message="upstream said [redacted] is bad"`) {
		t.Errorf("the log lacks the masked message: %s", logs)
	}
}

// A successful answer carrying the key in disguise — upper-cased,
// base64-encoded, spaced out or broken over lines — reaches the agent
// masked, the words around it intact; so does the base_url's password.
func TestSecretRunsMaskedInAnswers(t *testing.T) {
	const password = "Tr0ub4dor-and-3-horses"
	b64 := func(enc *base64.Encoding, s string) string { return enc.EncodeToString([]byte(s)) }
	spaced := strings.Join(strings.Split(longKey, ""), " ")
	// "Authorization: Bearer " is 22 bytes: its first 21 encode to 28
	// characters, and the next 2 mix its last byte with the key's first.
	header := b64(base64.StdEncoding, "Authorization: Bearer "+longKey)
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"upper-cased", "Your key: " + strings.ToUpper(longKey) + ".", "Your key: [redacted]."},
		{"36 characters of it", "Part: " + longKey[3:39] + "!", "Part: [redacted]!"},
		{"base64", "Encoded: " + b64(base64.StdEncoding, longKey) + " (done)", "Encoded: [redacted] (done)"},
		{"base64 URL without padding", "Encoded: " + b64(base64.RawURLEncoding, longKey), "Encoded: [redacted]"},
		{"base64 of the header", "Header: " + header, "Header: " + header[:30] + "[redacted]"},
		{"spaced out", "Spelled: " + spaced + ".\nNext line.", "Spelled: [redacted].\nNext line."},
		{"over lines", "Lines:\n" + longKey[:14] + "\n" + longKey[14:28] + "\n" + longKey[28:] + "\nEnd.", "Lines:\n[redacted]\nEnd."},
		{"the base_url password", "Password " + strings.ToUpper(password) + " here.", "Password [redacted] here."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeLLM(t, func(w http.ResponseWriter, _ *http.Request, _ int) { writeCompletion(w, tc.answer) })
			r := newRig(t, rigOpts{conn: map[string]any{
				"api_key": longKey, "base_url": strings.Replace(fake.URL, "http://", "http://ops:"+password+"@", 1) + "/v1",
			}})
			raw, te, err := r.invoke(context.Background(), map[string]any{"question": "Which room has a projector?"})
			if err != nil || te != nil {
				t.Fatalf("llm.ask: %v %v", te, err)
			}
			var out struct{ Answer string }
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatal(err)
			}
			if out.Answer != tc.want {
				t.Errorf("answer = %q\nwant     %q", out.Answer, tc.want)
			}
			for _, secret := range []string{longKey, password, b64(base64.StdEncoding, longKey)} {
				if l := runsOf(secret, string(raw)+r.logs.String()); len(l) > 0 {
					t.Errorf("runs of %q left: %q", secret, l)
				}
			}
		})
	}
}
