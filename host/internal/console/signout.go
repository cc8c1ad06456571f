package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Signouts records the sessions signed out before they expired. A
// session is a signed cookie any replica opens, so a sign-out must be
// kept where every replica reads it, until the cookie would have expired
// anyway.
type Signouts interface {
	// EndSession records session id as signed out until expires.
	EndSession(ctx context.Context, id string, expires time.Time) error
	// SessionEnded says whether session id was signed out.
	SessionEnded(ctx context.Context, id string) (bool, error)
}

var (
	errSignedOut = errors.New("the session was signed out")
	// errSignoutsUnread: whether the session was signed out is unknown;
	// the console then admits no one, and keeps the cookie.
	errSignoutsUnread = errors.New("the sign-outs cannot be read")
)

// id names the session in Signouts: a digest of its nonce, so the store
// holds nothing a cookie is made of.
func (ss session) id() string {
	sum := sha256.Sum256([]byte(macSession + ss.nonce))
	return hex.EncodeToString(sum[:])
}

// checkSignedOut says whether ss was signed out, on any replica.
func (c *Console) checkSignedOut(r *http.Request, ss session) error {
	ended, err := c.signouts.SessionEnded(r.Context(), ss.id())
	if err != nil {
		c.log.LogAttrs(r.Context(), slog.LevelError, "console: reading the sign-outs failed", slog.String("err", err.Error()))
		return errSignoutsUnread
	}
	if ended {
		return errSignedOut
	}
	return nil
}

// memSignouts keeps sign-outs in this process, for a console given no
// store: good for one host, not for replicas.
type memSignouts struct {
	mu    sync.Mutex
	now   func() time.Time
	until map[string]time.Time
}

func newMemSignouts(now func() time.Time) *memSignouts {
	return &memSignouts{now: now, until: map[string]time.Time{}}
}

func (m *memSignouts) EndSession(_ context.Context, id string, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, t := range m.until {
		if !now.Before(t) {
			delete(m.until, k)
		}
	}
	m.until[id] = expires
	return nil
}

func (m *memSignouts) SessionEnded(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.until[id]
	return ok, nil
}
