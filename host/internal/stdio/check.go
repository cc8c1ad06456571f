package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/capgate/capgate/host/internal/mcp"
)

// Environment variables the bridge reads.
const (
	// TokenEnv holds the bearer token. Only the environment carries it: a
	// command line is visible to every user of the machine (ps) and kept
	// in shell histories and editors' logs.
	TokenEnv = "CAPGATE_TOKEN"
	// URLEnv holds capgate's MCP endpoint when no flag gives it.
	URLEnv = "CAPGATE_URL"
)

// Server is what Check learned of the server at the URL.
type Server struct {
	// Name and Version are its serverInfo ("capgate" and its build).
	Name, Version string
	// Versions are the protocol versions it serves, newest first.
	Versions []string
}

func (s *Server) String() string {
	name := s.Name
	if name == "" {
		name = "an MCP server"
	}
	if s.Version != "" {
		name += " " + s.Version
	}
	if len(s.Versions) > 0 {
		name += " (protocol versions " + strings.Join(s.Versions, ", ") + ")"
	}
	return name
}

// Check asks the server at the URL what it is, with the token, before any
// message of the client's is forwarded: a wrong address or a refused token
// shows at once, as a *Problem saying which and what to do, rather than as
// the client's first request failing.
//
// It sends server/discover at 2026-07-28, which capgate answers without
// running anything and without an audit record, and which tells its
// build and protocol versions. A server that answers with a JSON-RPC error
// instead still took the token and speaks MCP: that is no problem.
func (b *Bridge) Check(ctx context.Context) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, min(b.opts.Timeout, checkTimeout))
	defer cancel()
	body := []byte(`{"jsonrpc":"2.0","id":"capgate-stdio-check","method":"server/discover","params":{"_meta":{"` +
		metaProtocolVersion + `":"` + mcp.Version20260728 + `","` +
		metaClientInfo + `":{"name":"capgate-stdio","version":` + jsonString(b.opts.Version) + `},"` +
		metaClientCapabilities + `":{}}}}`)
	m := parse(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url.String(), bytes.NewReader(body))
	if err != nil {
		return nil, &Problem{Unreachable, fmt.Sprintf("cannot send to %s: %v", b.shown, err)}
	}
	b.setHeaders(req.Header, &m, readParams(m.params), mcp.Version20260728)
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, b.transportProblem(err)
	}
	defer resp.Body.Close()
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var answer []byte
	if ct == "application/json" {
		answer, err = readBounded(resp.Body, 1<<20)
		if err != nil {
			return nil, b.transportProblem(err)
		}
	} else {
		answer, _ = readBounded(resp.Body, 4<<10)
	}
	msg, ok := compactMessage(answer)
	if !ok || ct != "application/json" {
		return nil, b.statusProblem(ctx, resp, answer)
	}
	var a struct {
		Result *struct {
			SupportedVersions []string `json:"supportedVersions"`
			Meta              struct {
				ServerInfo struct {
					Name    string `json:"name"`
					Version string `json:"version"`
				} `json:"io.modelcontextprotocol/serverInfo"`
			} `json:"_meta"`
		} `json:"result"`
	}
	s := &Server{}
	if json.Unmarshal(msg, &a) == nil && a.Result != nil {
		s.Name, s.Version = a.Result.Meta.ServerInfo.Name, a.Result.Meta.ServerInfo.Version
		s.Versions = a.Result.SupportedVersions
	}
	return s, nil
}

// checkTimeout bounds Check: a start-up probe, not a call.
const checkTimeout = 15 * time.Second

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
