package llm

import (
	"context"
	"fmt"
	"log/slog"
)

// maskingHandler masks the configured secrets in every message and text
// attribute before the wrapped handler sees them. describe already masks
// the provider's words it logs; this catches whatever a later log line
// forgets to.
type maskingHandler struct {
	next slog.Handler
	m    *masker
}

// maskingLogger is log with every record masked by m.
func maskingLogger(log *slog.Logger, m *masker) *slog.Logger {
	return slog.New(maskingHandler{next: log.Handler(), m: m})
}

func (h maskingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h maskingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.m.mask(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h maskingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = h.attr(a)
	}
	return maskingHandler{next: h.next.WithAttrs(masked), m: h.m}
}

func (h maskingHandler) WithGroup(name string) slog.Handler {
	return maskingHandler{next: h.next.WithGroup(name), m: h.m}
}

// attr masks a's text: strings, errors and Stringers (as their text), and
// groups member by member. Numbers and other values carry no text.
func (h maskingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.m.mask(v.String()))
	case slog.KindGroup:
		g := v.Group()
		masked := make([]any, len(g))
		for i, m := range g {
			masked[i] = h.attr(m)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.m.mask(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.m.mask(x.String()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
