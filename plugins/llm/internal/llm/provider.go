package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/capgate/capgate/sdk"
)

// Backoff between retries of a 408, 429 or 5xx answer, doubled per retry.
const (
	backoffBase = 250 * time.Millisecond
	backoffMax  = 4 * time.Second
)

// completion is what llm.ask needs from a provider's answer.
type completion struct {
	Answer       string
	FinishReason string
	Model        string
	Usage        Usage
}

// provider calls one connection's Chat Completions endpoint.
type provider struct {
	conn   Connection
	client *chatClient
	log    *slog.Logger
	masker *masker
}

// newProvider's hc replaces the process's shared client (sharedHTTPClient)
// when not nil. The client reads nothing from the environment but a proxy
// setting: no OPENAI_API_KEY or OPENAI_BASE_URL, which would send a key the
// operator set for something else to a connection configured without one
// (an Ollama server, say). m masks the configuration's secrets in what the
// provider writes.
func newProvider(conn Connection, hc *http.Client, log *slog.Logger, m *masker) *provider {
	return &provider{conn: conn, client: newChatClient(conn, hc), log: log, masker: m}
}

// complete sends the messages and returns the first choice. Its errors are
// tool errors with messages meant for the agent (see describe); only the
// caller's own cancellation comes back as ctx's error.
func (p *provider) complete(ctx context.Context, msgs []chatMessage) (completion, error) {
	callCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, p.conn.Timeout)
	defer cancel()
	body, err := json.Marshal(chatRequest{Model: p.conn.Model, Messages: msgs, MaxTokens: p.conn.MaxTokens})
	if err != nil {
		return completion{}, fmt.Errorf("llm.ask: encode the request: %w", err)
	}
	attempts, lastStatus := 0, 0
	for {
		attempts++
		resp, err := p.client.create(ctx, body)
		if err == nil {
			return p.decode(resp, attempts)
		}
		if callCtx.Err() != nil {
			// The caller went away; nobody reads a message.
			return completion{}, callCtx.Err()
		}
		delay, retry := p.retryDelay(err, attempts)
		if retry {
			// Another attempt only if it can start before the deadline:
			// otherwise this answer (a 429, a 503) is the truthful one, not
			// "timed out".
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= delay {
				retry = false
			}
		}
		if !retry {
			return completion{}, p.describe(ctx, err, attempts, lastStatus)
		}
		lastStatus = statusOf(err)
		p.log.Info("llm: retrying", "connection", p.conn.Slug, "attempt", attempts, "delay", delay.String(), "status", statusOf(err))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if callCtx.Err() != nil {
				return completion{}, callCtx.Err()
			}
			return completion{}, p.describe(ctx, err, attempts, lastStatus)
		}
	}
}

func (p *provider) decode(resp *chatResponse, attempts int) (completion, error) {
	if resp == nil || len(resp.Choices) == 0 {
		p.log.Warn("llm: answer without choices", "connection", p.conn.Slug, "attempts", attempts)
		return completion{}, sdk.Conflict("the LLM connection %q answered without any choices (a malformed Chat Completions response); "+
			"try again later or ask the operator to check the model server", p.conn.Slug)
	}
	ch := resp.Choices[0]
	// Everything the provider wrote is masked here, where it enters: a
	// provider or proxy echoing the request's Authorization header into the
	// completion or the model name must not hand the key to the agent. The
	// answer keeps its line breaks and length (mask, not clean); the model
	// name is a short label and gets clean's bounds too. Errors below quote
	// the model, so they are safe as well.
	c := completion{
		Answer: p.mask(ch.Message.Content), FinishReason: p.clean(ch.FinishReason), Model: p.clean(resp.Model),
		Usage: Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens},
	}
	if c.Model == "" {
		c.Model = p.conn.Model
	}
	if strings.TrimSpace(c.Answer) == "" {
		if ch.Message.Refusal != "" {
			return completion{}, sdk.Conflict("model %s declined to answer: %s", c.Model, p.clean(ch.Message.Refusal))
		}
		hint := ""
		if ch.FinishReason == "length" {
			hint = fmt.Sprintf(" (it stopped at max_tokens %d before writing any; the operator may raise max_tokens)", p.conn.MaxTokens)
		}
		return completion{}, sdk.Conflict("model %s returned an empty answer%s", c.Model, hint)
	}
	return c, nil
}

// retryDelay says whether err is worth another attempt and after how long:
// request timeouts (408), rate limits (429) and server errors (5xx) are;
// Retry-After-Ms / Retry-After, when the server sends one, set the wait.
func (p *provider) retryDelay(err error, attempts int) (time.Duration, bool) {
	var ae *apiError
	if !errors.As(err, &ae) || attempts > p.conn.MaxRetries {
		return 0, false
	}
	if ae.StatusCode != http.StatusRequestTimeout && ae.StatusCode != http.StatusTooManyRequests && ae.StatusCode < 500 {
		return 0, false
	}
	if d, ok := retryAfter(ae.Header); ok {
		return d, true
	}
	d := min(backoffBase<<(attempts-1), backoffMax)
	// Up to a quarter less, so many callers rate-limited together spread out.
	return d - time.Duration(rand.Int64N(int64(d/4)+1)), true
}

func retryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e6 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// describe maps a failed request to the error the agent sees, and logs the
// detail for the operator. Upstream failures are sdk.Conflict (the call was
// valid; the provider's state refuses it now, and a later try may work); an
// overflowing context window is sdk.InvalidInput (a shorter question or
// fewer sources fixes it). No message quotes the key or the base_url.
//
// lastStatus is the HTTP status of the attempt before this one (0: none),
// so a timeout during a retry still says what the provider answered before.
func (p *provider) describe(ctx context.Context, err error, attempts, lastStatus int) error {
	slug := p.conn.Slug
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		if ae.StatusCode >= 400 && ae.StatusCode < 500 {
			return p.refused(ae, attempts)
		}
		// A server error's message says what broke; masked, it is the
		// operator's to read.
		p.log.Warn("llm: provider error", "connection", slug, "status", ae.StatusCode, "code", p.clean(ae.Code),
			"type", p.clean(ae.Type), "message", p.clean(ae.Message), "attempts", attempts)
		if ae.StatusCode >= 500 {
			return sdk.Conflict("the LLM connection %q failed (HTTP %d, %s); try again later", slug, ae.StatusCode, tries(attempts))
		}
		// A 1xx or a 3xx the client did not follow.
		return sdk.Conflict("the LLM connection %q answered HTTP %d (%s), which is no Chat Completions answer; "+
			"the operator should check that base_url is the API root of an OpenAI-compatible server", slug, ae.StatusCode, http.StatusText(ae.StatusCode))
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		p.log.Warn("llm: provider timed out", "connection", slug, "timeout", p.conn.Timeout.String(), "attempts", attempts, "last_status", lastStatus)
		earlier := ""
		if lastStatus != 0 {
			earlier = fmt.Sprintf(" (%s; the last answered HTTP %d)", tries(attempts), lastStatus)
		}
		return sdk.Conflict("the LLM connection %q did not answer within its timeout of %s%s; try again later", slug, p.conn.Timeout, earlier)
	}
	// Not an HTTP answer: the transport failed, or the body was no Chat
	// Completions JSON. The error text may hold the URL; only its kind is
	// told to the agent.
	p.log.Warn("llm: request failed", "connection", slug, "base_url", redactURL(p.conn.BaseURL), "err", p.clean(err.Error()), "attempts", attempts)
	var ne net.Error
	switch {
	case errors.Is(err, errTooLarge):
		return sdk.Conflict("the LLM connection %q sent a response larger than %d MiB, which is no Chat Completions answer; "+
			"the operator should check that base_url is the API root of an OpenAI-compatible server", slug, maxResponseBody>>20)
	case errors.Is(err, errMalformed):
		return sdk.Conflict("the LLM connection %q sent a malformed response (not Chat Completions JSON); "+
			"the operator should check that base_url is the API root of an OpenAI-compatible server", slug)
	case errors.Is(err, syscall.ECONNREFUSED):
		return sdk.Conflict("the LLM connection %q is unreachable: connection refused (is the model server running?)", slug)
	case isDNSError(err):
		return sdk.Conflict("the LLM connection %q is unreachable: its host name does not resolve", slug)
	case errors.As(err, &ne):
		return sdk.Conflict("the LLM connection %q is unreachable: a network error occurred", slug)
	}
	return sdk.Conflict("the LLM connection %q failed: the request could not be completed", slug)
}

// refused is describe for a 4xx answer. A provider refusing a request
// quotes what it was sent, a wrong key included (whole, or all but a few
// characters), so nothing of its body is passed on or logged: the agent
// learns the status and what it means, the log the status alone. The body
// is read only to tell an overflowing context window.
func (p *provider) refused(ae *apiError, attempts int) error {
	slug, status := p.conn.Slug, ae.StatusCode
	overflow := contextOverflow(ae)
	p.log.Warn("llm: provider refused the request", "connection", slug, "status", status,
		"context_overflow", overflow, "attempts", attempts)
	switch {
	case overflow:
		return sdk.InvalidInput("the question and its sources do not fit model %s's context window; "+
			"ask a shorter question or pass a smaller max_sources", p.conn.Model)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return sdk.Conflict("the LLM connection %q refused its credentials (HTTP %d); the operator must fix its api_key", slug, status)
	case status == http.StatusNotFound:
		return sdk.Conflict("the LLM connection %q does not know model %q or has no Chat Completions endpoint (HTTP 404); "+
			"the operator must fix its model or base_url", slug, p.conn.Model)
	case status == http.StatusTooManyRequests:
		return sdk.Conflict("the LLM connection %q is rate limited (HTTP 429, %s); try again later", slug, tries(attempts))
	case status == http.StatusRequestTimeout:
		return sdk.Conflict("the LLM connection %q timed out the request (HTTP 408, %s); try again later", slug, tries(attempts))
	}
	text := http.StatusText(status)
	if text == "" {
		text = "client error"
	}
	return sdk.Conflict("the LLM connection %q refused the request (HTTP %d %s); the provider's message is withheld, "+
		"as it may quote the credentials", slug, status, text)
}

func isDNSError(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de)
}

func tries(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

// contextOverflow recognises a prompt too long for the model: OpenAI's
// context_length_exceeded code, and the messages of the servers that say it
// in words (vLLM: "maximum context length is …", llama.cpp:
// exceed_context_size_error, Ollama: "exceeds the context length").
func contextOverflow(ae *apiError) bool {
	if ae.StatusCode != http.StatusBadRequest && ae.StatusCode != http.StatusRequestEntityTooLarge {
		return false
	}
	text := strings.ToLower(ae.Code + " " + ae.Type + " " + ae.Message)
	for _, s := range []string{
		"context_length_exceeded", "exceed_context_size", "maximum context length", "context length",
		"context window", "context size", "too many tokens", "prompt is too long",
	} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// mask hides the configuration's secrets in provider text (some providers
// echo a wrong key back, a proxy may echo the Authorization header, a model
// may be talked into spelling it out; see masker). It changes nothing else,
// so an answer keeps its formatting.
func (p *provider) mask(s string) string { return p.masker.mask(s) }

// maskError masks a tool error's message: the last check on what the
// agent is told, whatever built the message.
func (p *provider) maskError(err error) error {
	var te *sdk.Error
	if errors.As(err, &te) {
		return &sdk.Error{Code: te.Code, Message: p.mask(te.Message)}
	}
	return err
}

// clean makes provider text safe to log or show in a message: the key is
// masked (before anything else, so no cut can leave part of it), control
// characters go, and the length is bounded.
func (p *provider) clean(s string) string {
	s = p.mask(s)
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
