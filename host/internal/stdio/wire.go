package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// methodCancelled is the notification a client sends to give up on a
// request.
const methodCancelled = "notifications/cancelled"

// line is one line of input: the message, or, when it ran over the bound,
// its first bytes.
type line struct {
	data    []byte
	tooLong bool
}

// readLines reads in line by line and sends each non-blank line to out,
// until in ends (nil) or fails, or done closes. A line longer than max is
// sent as its first max bytes with tooLong set, and the rest of it is
// skipped: one oversized message costs one answer, not the session.
func readLines(in io.Reader, max int64, out chan<- line, done <-chan struct{}) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		var buf []byte
		tooLong := false
		var err error
		for {
			var chunk []byte
			chunk, err = r.ReadSlice('\n')
			content := bytes.TrimSuffix(chunk, []byte("\n"))
			if !tooLong {
				if room := max - int64(len(buf)); int64(len(content)) > room {
					buf = append(buf, content[:room]...)
					tooLong = true
				} else {
					buf = append(buf, content...)
				}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if data := bytes.TrimSpace(buf); len(data) > 0 || tooLong {
			select {
			case out <- line{data: data, tooLong: tooLong}:
			case <-done:
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// message is what the bridge reads of a JSON-RPC message: enough to set
// the request's headers and to answer it when forwarding fails. Fields are
// the raw JSON of the members, nil when absent.
type message struct {
	raw    []byte
	batch  bool
	id     json.RawMessage
	method string // "" when absent or not a string
	params json.RawMessage
	// isResponse: no method, and a result or an error.
	isResponse bool
	// ids are the ids of a batch's requests.
	ids []json.RawMessage
}

// isRequest reports a message that expects an answer.
func (m *message) isRequest() bool { return !m.batch && m.method != "" && m.id != nil }

func (m *message) methodName() string {
	switch {
	case m.batch:
		return "(batch)"
	case m.method != "":
		return clip(m.method)
	case m.isResponse:
		return "(response)"
	}
	return "(none)"
}

// parse reads the members of a message, or of each message of a batch.
// It reads as far as the JSON is whole, so the first bytes of a message
// too long to take still give its id when the id comes early, as clients
// write it.
func parse(b []byte) message {
	m := message{raw: b}
	if len(b) > 0 && b[0] == '[' {
		m.batch = true
		dec := json.NewDecoder(bytes.NewReader(b))
		if _, err := dec.Token(); err != nil {
			return m
		}
		for dec.More() {
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				break
			}
			if e := parse(raw); e.method != "" && e.id != nil {
				m.ids = append(m.ids, e.id)
			}
		}
		return m
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return m
	}
	hasResult := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			break
		}
		switch key {
		case "id":
			if string(raw) != "null" {
				m.id = raw
			}
		case "method":
			_ = json.Unmarshal(raw, &m.method)
		case "params":
			m.params = raw
		case "result", "error":
			hasResult = true
		}
	}
	m.isResponse = m.method == "" && hasResult
	return m
}

// sseReader reads the events of a text/event-stream body (the WHATWG
// format: data lines joined by newlines, an empty line ends an event,
// lines starting with a colon are comments).
type sseReader struct {
	r   *bufio.Reader
	max int
	// seen is called on every line, comments included: the stream is
	// alive.
	seen func()
}

var errEventTooLarge = errors.New("an event of the stream exceeds the bound")

// next returns the data of the next message event; io.EOF when the
// stream ends.
func (s *sseReader) next() ([]byte, error) {
	var data []byte
	hasData := false
	event := ""
	for {
		ln, err := s.readLine()
		if err != nil {
			if err == io.EOF && hasData && (event == "" || event == "message") {
				return data, nil // a last event without its blank line
			}
			return nil, err
		}
		s.seen()
		if len(ln) == 0 {
			if hasData && (event == "" || event == "message") {
				return data, nil
			}
			data, hasData, event = data[:0], false, ""
			continue
		}
		if ln[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(ln, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > s.max {
				return nil, errEventTooLarge
			}
			data = append(data, value...)
			hasData = true
		case "event":
			event = string(value)
		}
	}
}

// readLine returns one line without its end (\n, \r\n or \r\n), bounded by
// max.
func (s *sseReader) readLine() ([]byte, error) {
	var ln []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(ln)+len(chunk) > s.max+2 {
			return nil, errEventTooLarge
		}
		ln = append(ln, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (err != io.EOF || len(ln) == 0) {
			return nil, err
		}
		ln = bytes.TrimSuffix(ln, []byte("\n"))
		return bytes.TrimSuffix(ln, []byte("\r")), nil
	}
}
