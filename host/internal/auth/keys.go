package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/capgate/capgate/host/internal/config"
)

// Bounds on what the issuer serves.
const (
	maxMetadataBytes = 1 << 20
	maxJWKSBytes     = 1 << 20
	maxJWKSKeys      = 100
	fetchTimeout     = 10 * time.Second
)

// keySource holds the issuer's published keys: fetched when it starts,
// again every JWKSRefreshInterval, and at once when a token names a key
// not yet known, at most once every JWKSMinRefreshInterval, so a rotated
// key is taken up at the first token signed with it while tokens naming
// made-up keys cannot make capgate hammer the issuer.
type keySource struct {
	cfg config.OAuth
	hc  *http.Client
	log *slog.Logger

	keys atomic.Pointer[keySet]

	// mu serialises fetches and guards what follows.
	mu      sync.Mutex
	jwksURL string    // config, or discovered; "" until known
	lastTry time.Time // the last fetch a token asked for
	lastErr error     // the last fetch's failure; nil after a success

	stop context.CancelFunc
	done chan struct{}
}

// keySet is one generation of the published keys, never changed.
type keySet struct {
	set     jwk.Set
	fetched time.Time
}

// errKeysUnavailable: the keys could not be had, so no token can be
// checked; that is capgate's trouble, not the token's (503).
var errKeysUnavailable = &TokenError{Status: http.StatusServiceUnavailable,
	Description: "the authorization server's keys cannot be fetched right now; retry shortly"}

func newKeySource(cfg config.OAuth, hc *http.Client, log *slog.Logger) *keySource {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keySource{cfg: cfg, hc: hc, log: log, jwksURL: cfg.JWKSURL, stop: cancel, done: make(chan struct{})}
	// The first fetch holds the lock from here: a token arriving before it
	// ends waits for it rather than fetching a second time.
	k.mu.Lock()
	go k.loop(ctx)
	return k
}

func (k *keySource) close() {
	k.stop()
	<-k.done
}

// loop fetches the keys now, then whenever they are JWKSRefreshInterval
// old (a fetch a token asked for counts), retrying every
// JWKSMinRefreshInterval while they cannot be had.
func (k *keySource) loop(ctx context.Context) {
	defer close(k.done)
	err := k.fetch(ctx) // k.mu is held: see newKeySource
	k.mu.Unlock()
	t := time.NewTimer(k.after(ctx, err))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.mu.Lock()
		if ks := k.keys.Load(); ks != nil && k.lastErr == nil {
			if age := time.Since(ks.fetched); age < k.cfg.JWKSRefreshInterval {
				k.mu.Unlock()
				t.Reset(k.cfg.JWKSRefreshInterval - age)
				continue
			}
		}
		err := k.fetch(ctx)
		k.mu.Unlock()
		t.Reset(k.after(ctx, err))
	}
}

// after is how long the loop waits after a fetch that ended with err.
func (k *keySource) after(ctx context.Context, err error) time.Duration {
	if err == nil {
		return k.cfg.JWKSRefreshInterval
	}
	if ctx.Err() == nil {
		k.log.Warn("oauth: the issuer's keys could not be fetched; tokens signed with keys not yet known are refused until they can",
			"issuer", k.cfg.Issuer, "err", bound(err.Error(), 512), "retry_in", k.cfg.JWKSMinRefreshInterval.String())
	}
	return k.cfg.JWKSMinRefreshInterval
}

// lookup finds the key kid names (the only key, when the token names
// none and the issuer publishes one), fetching the keys again when it is
// not known and the last such fetch is long enough ago.
func (k *keySource) lookup(ctx context.Context, kid string) (jwk.Key, error) {
	if key, ok := k.find(kid); ok {
		return key, nil
	}
	k.mu.Lock()
	seen := k.keys.Load()
	if key, ok := k.find(kid); ok {
		k.mu.Unlock()
		return key, nil
	}
	now := time.Now()
	if now.Sub(k.lastTry) >= k.cfg.JWKSMinRefreshInterval {
		k.lastTry = now
		if err := k.fetch(ctx); err != nil {
			k.log.Warn("oauth: a token names a key not yet known, and the issuer's keys could not be fetched",
				"issuer", k.cfg.Issuer, "err", bound(err.Error(), 512))
		}
	}
	failed := k.lastErr
	k.mu.Unlock()
	if key, ok := k.find(kid); ok {
		return key, nil
	}
	if k.keys.Load() == nil || failed != nil && k.keys.Load() == seen {
		// Nothing to check against, or the keys are stale and cannot be
		// fetched: this token may be good.
		return nil, &TokenError{Status: errKeysUnavailable.Status, Description: errKeysUnavailable.Description,
			reason: "keys unavailable: " + errString(failed)}
	}
	if kid == "" {
		return nil, invalid("the access token names no key (kid), and the issuer publishes several", "no kid")
	}
	return nil, invalid("the access token is signed with a key the issuer does not publish", "unknown kid "+bound(kid, 64))
}

func errString(err error) string {
	if err == nil {
		return "none fetched yet"
	}
	return err.Error()
}

// find looks kid up in the keys held now.
func (k *keySource) find(kid string) (jwk.Key, bool) {
	ks := k.keys.Load()
	if ks == nil {
		return nil, false
	}
	if kid == "" {
		if ks.set.Len() == 1 {
			return ks.set.Key(0)
		}
		return nil, false
	}
	return ks.set.LookupKeyID(kid)
}

// fetch discovers the JWKS URL when it is not known yet, then fetches
// the keys. k.mu is held.
func (k *keySource) fetch(ctx context.Context) (err error) {
	defer func() { k.lastErr = err }()
	// One bound for the whole fetch, discovery included: tokens wait for
	// it.
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	if k.jwksURL == "" {
		u, err := k.discover(ctx)
		if err != nil {
			return err
		}
		k.jwksURL = u
	}
	body, err := k.get(ctx, k.jwksURL, maxJWKSBytes)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", k.jwksURL, err)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", k.jwksURL, err)
	}
	if set.Len() == 0 || set.Len() > maxJWKSKeys {
		return fmt.Errorf("JWKS %s: %d keys, want 1 to %d", k.jwksURL, set.Len(), maxJWKSKeys)
	}
	k.keys.Store(&keySet{set: set, fetched: time.Now()})
	return nil
}

// discover finds the issuer's JWKS URL in its metadata: OAuth 2.0
// authorization server metadata (RFC 8414), then OpenID Connect
// discovery, at the places MCP clients look. A document naming another
// issuer is refused (RFC 8414 section 3.3), as is a JWKS URL that is not
// https (plain http to a loopback host only).
func (k *keySource) discover(ctx context.Context) (string, error) {
	var errs []error
	for _, u := range metadataURLs(k.cfg.Issuer) {
		body, err := k.get(ctx, u, maxMetadataBytes)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(body, &meta); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		if meta.Issuer != k.cfg.Issuer {
			errs = append(errs, fmt.Errorf("%s names issuer %q, not %q", u, bound(meta.Issuer, 256), k.cfg.Issuer))
			continue
		}
		if msg := secureURL(meta.JWKSURI); msg != "" {
			errs = append(errs, fmt.Errorf("%s: jwks_uri %s", u, msg))
			continue
		}
		k.log.Info("oauth: found the issuer's keys", "issuer", k.cfg.Issuer, "jwks_url", meta.JWKSURI)
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("the issuer's metadata: %w", errors.Join(errs...))
}

// metadataURLs are where an issuer's metadata may be: path insertion for
// RFC 8414 and OpenID Connect, then OpenID Connect's path appending.
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	base := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	out := []string{base + "/.well-known/oauth-authorization-server" + path, base + "/.well-known/openid-configuration" + path}
	if path != "" {
		out = append(out, base+path+"/.well-known/openid-configuration")
	}
	return out
}

// secureURL says what is wrong with u as a place to fetch keys from, or "".
func secureURL(u string) string {
	p, err := url.Parse(u)
	switch {
	case u == "":
		return "is missing"
	case err != nil || !p.IsAbs() || p.Host == "":
		return fmt.Sprintf("%q is not a URL", bound(u, 256))
	case p.Scheme == "https":
		return ""
	case p.Scheme == "http":
		host := p.Hostname()
		if ip := net.ParseIP(host); strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback() {
			return ""
		}
	}
	return fmt.Sprintf("%q is not https", bound(u, 256))
}

// get fetches u, at most limit bytes, wanting 200.
func (k *keySource) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := k.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		return nil, fmt.Errorf("status %d", res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("more than %d bytes", limit)
	}
	return body, nil
}

// CheckKeys fetches the issuer's keys once as a running host would
// (through the issuer's metadata unless jwks_url is set) and returns how
// many it publishes: `capgate validate` uses it to say whether the
// issuer can be reached from here.
func CheckKeys(ctx context.Context, cfg config.OAuth, hc *http.Client) (int, error) {
	if hc == nil {
		hc = &http.Client{Timeout: fetchTimeout}
	}
	k := &keySource{cfg: cfg, hc: hc, log: slog.New(slog.DiscardHandler), jwksURL: cfg.JWKSURL}
	if err := k.fetch(ctx); err != nil {
		return 0, err
	}
	return k.keys.Load().set.Len(), nil
}
