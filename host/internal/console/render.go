package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"
)

// view is what every page template gets.
type view struct {
	Title string
	// Nav names the menu entry to mark as the current page.
	Nav     string
	Session *session
	Version string
	// Flash says what the last form did; Error what went wrong, with the
	// API's problem when it gave one.
	Flash   string
	Error   string
	Problem *apiError
	// Link is where an error page points to go on.
	Link string
	Data any
	// Static maps a static file's name to its URL, versioned by content.
	Static map[string]string
}

// pages holds one template set per page, each the layout plus the page.
type pages struct {
	set map[string]*template.Template
}

var funcs = template.FuncMap{
	"time": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05")
		case string:
			if p, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return p.UTC().Format("2006-01-02 15:04:05")
			}
			return v
		}
		return fmt.Sprint(t)
	},
	"join": func(s []string) string { return strings.Join(s, ", ") },
	"pretty": func(v any) string {
		if v == nil {
			return ""
		}
		if raw, ok := v.(json.RawMessage); ok {
			if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
				return ""
			}
			var buf bytes.Buffer
			if json.Indent(&buf, raw, "", "  ") == nil {
				return buf.String()
			}
			return string(raw)
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	},
	"ms": func(ns int64) string {
		d := time.Duration(ns)
		switch {
		case d <= 0:
			return ""
		case d < time.Millisecond:
			return fmt.Sprintf("%d µs", d/time.Microsecond)
		case d < 10*time.Second:
			return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
		}
		return d.Round(time.Second).String()
	},
	// dict is what the decide form needs: the held call and the
	// session's form token.
	"dict": func(ss *session, id string) map[string]string {
		csrf := ""
		if ss != nil {
			csrf = ss.CSRF
		}
		return map[string]string{"ID": id, "CSRF": csrf}
	},
	"short": func(s string, n int) string {
		if len(s) <= n {
			return s
		}
		return s[:n] + "…"
	},
}

func loadPages(fsys fs.FS, st *statics) (*pages, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(fsys, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	names, err := fs.Glob(fsys, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	p := &pages{set: map[string]*template.Template{}}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		p.set[name] = t
	}
	return p, nil
}

// render writes page name with status. A page is rendered whole before a
// byte is sent, so a template failing halfway sends an error, not half a
// page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	t := c.pages.set[name]
	v.Version, v.Static = c.version, c.static.urls
	if ss, ok := r.Context().Value(sessionKey{}).(*session); ok && v.Session == nil {
		v.Session = ss
	}
	var buf bytes.Buffer
	if t == nil {
		c.log.LogAttrs(r.Context(), slog.LevelError, "console: no such page template", slog.String("page", name))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.log.LogAttrs(r.Context(), slog.LevelError, "console: rendering a page failed", slog.String("page", name), slog.String("err", err.Error()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fragment writes the named template of page name alone, for the tail.
func (c *Console) fragment(w http.ResponseWriter, r *http.Request, page, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages.set[page].ExecuteTemplate(&buf, name, data); err != nil {
		c.log.LogAttrs(r.Context(), slog.LevelError, "console: rendering a fragment failed", slog.String("fragment", name), slog.String("err", err.Error()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// statics are the embedded static files, each with its digest as ETag.
type statics struct {
	files map[string]static
	urls  map[string]string
}

type static struct {
	body        []byte
	etag        string
	contentType string
}

func loadStatics(fsys fs.FS) (*statics, error) {
	entries, err := fs.ReadDir(fsys, "static")
	if err != nil {
		return nil, fmt.Errorf("console: static files: %w", err)
	}
	st := &statics{files: map[string]static{}, urls: map[string]string{}}
	for _, e := range entries {
		b, err := fs.ReadFile(fsys, "static/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("console: static file %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		ct := "application/octet-stream"
		switch path.Ext(e.Name()) {
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		v := hex.EncodeToString(sum[:8])
		st.files[e.Name()] = static{body: b, etag: `"` + v + `"`, contentType: ct}
		st.urls[e.Name()] = base + "/static/" + e.Name() + "?v=" + v
	}
	return st, nil
}

// serveStatic serves an embedded file; its URL carries its digest, so it
// may be cached for long and a new build's is fetched anew.
func (c *Console) serveStatic(w http.ResponseWriter, r *http.Request) {
	f, ok := c.static.files[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("ETag", f.etag)
	w.Header().Set("Cache-Control", "public, max-age=86400")
	if r.Header.Get("If-None-Match") == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(f.body)
}
