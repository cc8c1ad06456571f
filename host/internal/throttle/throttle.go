// Package throttle counts failed authentications, per client and across
// all clients, and says when to stop listening.
//
// A client that fails PerClient times within Window is refused until the
// window passes. Failures of every client together are held to Global
// within Window: past it, every client is refused for the rest of the
// window except those that authenticated within TrustFor. The global
// budget is what stops a guesser who rotates addresses; its price is that
// during such a flood a client that has not signed in lately waits too.
// The counts are the process's own: each replica throttles what it sees.
package throttle

import (
	"sync"
	"time"
)

// Defaults for zero Limits fields.
const (
	DefaultPerClient = 10
	DefaultGlobal    = 100
	DefaultWindow    = time.Minute
	DefaultTrustFor  = 24 * time.Hour
	// maxClients bounds the clients counted and the clients trusted: past
	// it the oldest are forgotten, so a flood of addresses costs bounded
	// memory (and, being a flood, meets the global budget anyway).
	maxClients = 4096
)

// Limits are a Failures' bounds.
type Limits struct {
	PerClient int
	Global    int
	Window    time.Duration
	// TrustFor is how long a client that authenticated is exempt from the
	// global budget (never from its own).
	TrustFor time.Duration
}

// Scope says which budget refused a client.
type Scope string

const (
	None   Scope = ""
	Client Scope = "client"
	All    Scope = "global"
)

type count struct {
	n     int
	since time.Time
}

// Failures counts failed authentications. It is safe for concurrent use.
type Failures struct {
	lim    Limits
	mu     sync.Mutex
	by     map[string]*count
	order  []string // counted clients, oldest first
	global count
	good   map[string]time.Time // when each trusted client last authenticated
	gorder []string
}

// New counts failures within lim, zero fields taking the defaults.
func New(lim Limits) *Failures {
	if lim.PerClient <= 0 {
		lim.PerClient = DefaultPerClient
	}
	if lim.Global <= 0 {
		lim.Global = DefaultGlobal
	}
	if lim.Window <= 0 {
		lim.Window = DefaultWindow
	}
	if lim.TrustFor <= 0 {
		lim.TrustFor = DefaultTrustFor
	}
	return &Failures{lim: lim, by: map[string]*count{}, good: map[string]time.Time{}}
}

// Allow says whether client may try to authenticate at now; when not,
// which budget refused it and how long until it may.
func (f *Failures) Allow(client string, now time.Time) (Scope, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.by[client]; c != nil && c.n >= f.lim.PerClient {
		if left := f.lim.Window - now.Sub(c.since); left > 0 {
			return Client, left
		}
	}
	if f.global.n >= f.lim.Global {
		if left := f.lim.Window - now.Sub(f.global.since); left > 0 {
			if t, ok := f.good[client]; !ok || now.Sub(t) >= f.lim.TrustFor {
				return All, left
			}
		}
	}
	return None, 0
}

// Fail counts a failure of client at now.
func (f *Failures) Fail(client string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bump(&f.global, now, f.lim.Window)
	c := f.by[client]
	if c == nil {
		if len(f.order) >= maxClients {
			delete(f.by, f.order[0])
			f.order = f.order[1:]
		}
		c = &count{since: now}
		f.by[client] = c
		f.order = append(f.order, client)
	}
	bump(c, now, f.lim.Window)
}

func bump(c *count, now time.Time, window time.Duration) {
	if c.n == 0 || now.Sub(c.since) >= window {
		c.n, c.since = 0, now
	}
	c.n++
}

// Succeed forgets client's failures and trusts it for TrustFor.
func (f *Failures) Succeed(client string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// A busy client succeeds on every request: refreshing its trust now
	// and then is enough, and keeps a success from walking the lists.
	if t, ok := f.good[client]; ok && f.by[client] == nil && now.Sub(t) < time.Minute {
		return
	}
	if _, ok := f.by[client]; ok {
		delete(f.by, client)
		f.order = without(f.order, client)
	}
	if _, ok := f.good[client]; ok {
		f.gorder = without(f.gorder, client)
	} else if len(f.gorder) >= maxClients {
		delete(f.good, f.gorder[0])
		f.gorder = f.gorder[1:]
	}
	f.good[client] = now
	f.gorder = append(f.gorder, client)
}

func without(list []string, s string) []string {
	for i, k := range list {
		if k == s {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// RetryAfter is left as a Retry-After value: whole seconds, at least 1.
func RetryAfter(left time.Duration) int {
	s := int((left + time.Second - 1) / time.Second)
	return max(s, 1)
}
