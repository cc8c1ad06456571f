package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/capgate/capgate/host/internal/server"
)

// labelScheme is the Authorization scheme of the console's calls to the
// admin API in process. It is meaningful only to the API handler the
// console is given (see Options.API), which is never reachable from the
// network: the public endpoint knows bearer tokens alone.
const labelScheme = "Label "

// LabelAuthorization is the Authorization value the console sends the
// in-process admin API for the token labelled label.
func LabelAuthorization(label string) string { return labelScheme + label }

// LabelOf reads the label back from an Authorization value of
// LabelAuthorization; false for any other value.
func LabelOf(authorization string) (string, bool) {
	label, ok := strings.CutPrefix(authorization, labelScheme)
	return label, ok && label != ""
}

// maxAPIAnswer bounds an answer the console reads from the API: its
// largest is a page of audit records, each bounded by the trail.
const maxAPIAnswer = 16 << 20

// apiError is an answer of the admin API that is not a success: its
// problem details when it gave them.
type apiError struct {
	Status  int
	Problem server.Problem
}

func (e *apiError) Error() string {
	if e.Problem.Detail != "" {
		return e.Problem.Detail
	}
	return fmt.Sprintf("the admin API answered %d %s", e.Status, http.StatusText(e.Status))
}

// recorder is the response writer of an in-process API call, bounded.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(b) > maxAPIAnswer {
		r.over = true
		return 0, fmt.Errorf("console: an admin API answer over %d bytes", maxAPIAnswer)
	}
	return r.body.Write(b)
}

// call asks the admin API, as the session's token, method path?query with
// body, and decodes a success into out. The request's context and remote
// address go along, so the API's logs and deadlines are the browser's.
func (c *Console) call(r *http.Request, ss session, method, path string, query url.Values, body any, out any) error {
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("console: encode the body of %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, target, rd)
	if err != nil {
		return fmt.Errorf("console: build %s %s: %w", method, path, err)
	}
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Authorization", LabelAuthorization(ss.Label))
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	c.api.ServeHTTP(rec, req)
	if rec.over {
		return &apiError{Status: http.StatusBadGateway, Problem: server.NewProblem(http.StatusBadGateway,
			fmt.Sprintf("the admin API's answer is over %d MiB; narrow the filters", maxAPIAnswer>>20))}
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status < 200 || rec.status > 299 {
		e := &apiError{Status: rec.status}
		if ct, _, _ := mime.ParseMediaType(rec.header.Get("Content-Type")); ct == server.MIMEProblemJSON {
			_ = json.Unmarshal(rec.body.Bytes(), &e.Problem)
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("console: decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}
