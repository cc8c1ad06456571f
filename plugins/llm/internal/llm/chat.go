package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The client of OpenAI's Chat Completions API (POST {base_url}/chat/completions)
// that provider.go calls: one request, one answer, no retries (complete
// retries) and no streaming. Everything read from the server is bounded.

// Bounds on what the client reads from a server.
const (
	// maxResponseBody bounds a successful answer. A completion is a few
	// kilobytes (max_tokens of text, JSON-escaped); a larger body is no
	// answer worth reading into memory.
	maxResponseBody = 8 << 20
	// maxErrorBody bounds how much of an error answer is read: its status
	// is what matters, and its message is cut to 300 characters anyway.
	maxErrorBody = 64 << 10
)

// chatMessage is one message of a Chat Completions request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func systemMessage(s string) chatMessage { return chatMessage{Role: "system", Content: s} }
func userMessage(s string) chatMessage   { return chatMessage{Role: "user", Content: s} }

// chatRequest is the request body: the fields llm.ask sets, and no others
// (the server's defaults hold for the rest).
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	// MaxTokens is max_tokens, which every compatible server accepts.
	MaxTokens int `json:"max_tokens"`
}

// chatResponse is the part of a completion llm.ask reads.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content string `json:"content"`
			Refusal string `json:"refusal"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// apiError is an answer with a status other than 2xx, its body read into
// OpenAI's error fields whichever shape the server wrote them in (see
// parseErrorBody). Message, Type and Code are the server's words, unmasked:
// describe cleans them before they go anywhere.
type apiError struct {
	StatusCode int
	// Header is the answer's, for Retry-After.
	Header  http.Header
	Message string
	Type    string
	Code    string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("chat completions: HTTP %d", e.StatusCode)
}

// errMalformed is a 2xx answer that is no Chat Completions JSON.
var errMalformed = errors.New("chat completions: the response is not Chat Completions JSON")

// errTooLarge is a 2xx answer longer than maxResponseBody.
var errTooLarge = fmt.Errorf("chat completions: the response is larger than %d MiB", maxResponseBody>>20)

// chatClient sends Chat Completions requests to one connection.
type chatClient struct {
	hc  *http.Client
	url string // {base_url}/chat/completions
	key string // "": no Authorization header
}

func newChatClient(conn Connection, hc *http.Client) *chatClient {
	if hc == nil {
		hc = sharedHTTPClient()
	}
	// ParseConfig trimmed base_url's trailing slashes and refused a query
	// or fragment, so the path is appended as is.
	return &chatClient{hc: hc, url: conn.BaseURL + "/chat/completions", key: conn.APIKey}
}

// sharedHTTPClient is the client of every connection of the process (the
// plugin has one, but a reconfiguration makes another): one transport, so
// its idle connections are reused and not multiplied. It has no Timeout:
// each call's context carries its connection's timeout, retries included,
// and a model may take most of it before the first byte of its answer.
var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	t := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		MaxIdleConnsPerHost:   16, // concurrent llm.ask calls to one server
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: t}
})

// create sends one request and decodes the answer. Its errors are an
// *apiError (the server answered a non-2xx status), errMalformed (wrapped),
// errTooLarge, or what the transport returned (a refused
// connection, a DNS failure, ctx's deadline), wrapped.
func (c *chatClient) create(ctx context.Context, body []byte) (*chatResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		// The URL was validated at configuration; the error would quote it.
		return nil, errors.New("chat completions: the request could not be built")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "capgate-plugin-llm")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chat completions: %w", err)
	}
	// A body read to its end leaves the connection for the next request;
	// one cut off at a bound closes it (draining could wait on a server
	// that sends forever, or announces more than it sends).
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		// A 3xx here is one the client did not follow (no Location, or
		// 304): no completion either.
		raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		e := parseErrorBody(raw)
		e.StatusCode, e.Header = res.StatusCode, res.Header
		return nil, e
	}
	if res.ContentLength > maxResponseBody {
		return nil, errTooLarge
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBody+1))
	if err != nil {
		return nil, fmt.Errorf("chat completions: reading the response: %w", err)
	}
	if len(raw) > maxResponseBody {
		return nil, errTooLarge
	}
	var out chatResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	return &out, nil
}

// parseErrorBody reads an error answer's body in each shape servers write
// it: OpenAI's and llama.cpp's {"error": {"message", "type", "code"}},
// vLLM's (before 0.10) {"message", "type", "code"} at the top level,
// Ollama's {"error": "text"} and FastAPI's {"detail": "text"}. Anything
// else (HTML from a proxy, an empty body) leaves the fields empty: the
// status is then all there is to tell.
func parseErrorBody(body []byte) *apiError {
	e := &apiError{}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return e
	}
	var inner map[string]json.RawMessage
	switch {
	case json.Unmarshal(top["error"], &inner) == nil && inner != nil:
		e.Message, e.Type, e.Code = scalar(inner["message"]), scalar(inner["type"]), scalar(inner["code"])
	case scalar(top["error"]) != "":
		e.Message = scalar(top["error"])
	case scalar(top["message"]) != "":
		e.Message, e.Type, e.Code = scalar(top["message"]), scalar(top["type"]), scalar(top["code"])
	case scalar(top["detail"]) != "":
		e.Message = scalar(top["detail"])
	}
	return e
}

// scalar is a JSON string's text or a number's digits (llama.cpp and vLLM
// send the status as "code": 400); "" for anything else.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if _, err := strconv.ParseFloat(n.String(), 64); err == nil {
			return n.String()
		}
	}
	return ""
}
