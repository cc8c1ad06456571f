package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/capgate/capgate/internal/dispatch"
)

const (
	// DefaultRedisPrefix starts every key Redis keeps for the counter
	// (after redis_rate's own "rate:").
	DefaultRedisPrefix = "capgate:"
	// DefaultRedisTimeout bounds one Allow: a call waits at most this for
	// the count.
	DefaultRedisTimeout = 200 * time.Millisecond

	maxPrefixLen  = 64
	maxTimeout    = 5 * time.Second
	maxPlainKey   = 96               // longer keys are hashed
	warnEvery     = 30 * time.Second // at most one warning per this
	maxLoggedText = 200              // of a Redis error, in a log line
)

// RedisOptions tune a Redis counter. The zero value is usable.
type RedisOptions struct {
	// Prefix starts the counter's keys, so several deployments can share
	// one Redis; DefaultRedisPrefix when empty. At most 64 printable ASCII
	// characters, no spaces.
	Prefix string
	// Timeout bounds each Allow as a whole; DefaultRedisTimeout when 0, at
	// most 5s. It replaces any timeouts given in the URL.
	Timeout time.Duration
	// FailOpen admits calls when Redis cannot keep the count, instead of
	// returning the error (and so refusing them).
	FailOpen bool
	// Logger receives the warnings about Redis failing; slog.Default()
	// when nil.
	Logger *slog.Logger
}

// Redis counts calls in a Redis shared by the replicas; see the package
// doc for its keys and its failure behaviour.
type Redis struct {
	rdb      *redis.Client
	lim      *redis_rate.Limiter
	addr     string // host:port, what messages name
	prefix   string
	timeout  time.Duration
	failOpen bool
	log      *slog.Logger

	now        func() time.Time
	mu         sync.Mutex
	lastWarn   time.Time
	unreported int // failures since the last warning
}

var _ dispatch.Limiter = (*Redis)(nil)

// NewRedis returns a counter on the Redis at rawURL (redis:// or
// rediss://, as in redis://user:password@host:6379/0). It does not
// connect: see Ping.
func NewRedis(rawURL string, opts RedisOptions) (*Redis, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultRedisPrefix
	}
	if err := validPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	switch {
	case opts.Timeout == 0:
		opts.Timeout = DefaultRedisTimeout
	case opts.Timeout < time.Millisecond || opts.Timeout > maxTimeout:
		return nil, fmt.Errorf("ratelimit: redis timeout %s: want from 1ms to %s", opts.Timeout, maxTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	o, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = opts.Timeout, opts.Timeout, opts.Timeout, opts.Timeout
	o.ContextTimeoutEnabled = true // Allow's deadline bounds the whole exchange
	// One retry, soon: a pooled connection broken by a Redis restart is
	// replaced within the same call, and a Redis that is down fails fast.
	o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = 1, time.Millisecond, opts.Timeout/4
	o.DialerRetries = 1 // a refused dial is an answer, not worth waiting out
	// A standalone counter needs neither; each is one more round trip on
	// every new connection.
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	quietClientLog.Do(func() { redis.SetLogger(debugLog{}) })
	rdb := redis.NewClient(o)
	return &Redis{
		rdb: rdb, lim: redis_rate.NewLimiter(rdb), addr: o.Addr,
		prefix: opts.Prefix, timeout: opts.Timeout, failOpen: opts.FailOpen, log: opts.Logger,
		now: time.Now,
	}, nil
}

// parseURL reads a redis:// or rediss:// URL. Its errors never repeat the
// URL, which may hold a password.
func parseURL(rawURL string) (*redis.Options, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || (scheme != "redis" && scheme != "rediss") {
		if len(scheme) > 16 || !ok {
			scheme = "?"
		}
		return nil, fmt.Errorf("ratelimit: redis URL: scheme %q: want redis:// or rediss://, as in redis://host:6379/0", scheme)
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the whole URL
		}
		return nil, fmt.Errorf("ratelimit: redis URL: %w", err)
	}
	return o, nil
}

func validPrefix(p string) error {
	if len(p) > maxPrefixLen {
		return fmt.Errorf("ratelimit: redis key prefix is %d bytes: at most %d", len(p), maxPrefixLen)
	}
	for i := range len(p) {
		if p[i] <= ' ' || p[i] > '~' {
			return fmt.Errorf("ratelimit: redis key prefix %q: only printable ASCII, no spaces", p)
		}
	}
	return nil
}

// Where names the counter's store for a refusal while it is unreachable.
func (r *Redis) Where() string { return "Redis" }

var _ dispatch.Counter = (*Redis)(nil)

// Allow implements dispatch.Limiter.
func (r *Redis) Allow(ctx context.Context, key dispatch.LimitKey, rate dispatch.Rate) (bool, time.Duration, error) {
	if rate.Count <= 0 || rate.Per <= 0 || rate.Burst < 0 {
		return false, 0, fmt.Errorf("ratelimit: %+v is not a rate to count", rate)
	}
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	bounded, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	limit := limitOf(rate)
	res, err := r.lim.Allow(bounded, r.redisKey(key.String(), limit), limit)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return false, 0, cerr // the caller left; Redis may be fine
		}
		return r.failed(err)
	}
	if res.Allowed > 0 {
		return true, 0, nil
	}
	return false, max(res.RetryAfter, 0), nil
}

// limitOf is rate as a GCRA limit, its burst the one in effect.
func limitOf(rate dispatch.Rate) redis_rate.Limit {
	return redis_rate.Limit{Rate: rate.Count, Burst: rate.BurstOrCount(), Period: rate.Per}
}

// redisKey is key's count under limit: see the package doc.
func (r *Redis) redisKey(key string, limit redis_rate.Limit) string {
	var b strings.Builder
	b.WriteString(r.prefix)
	b.WriteString(strconv.Itoa(limit.Rate))
	b.WriteByte('/')
	b.WriteString(limit.Period.String())
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(limit.Burst))
	if len(key) <= maxPlainKey {
		b.WriteString(":k:")
		b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(key)))
	} else {
		sum := sha256.Sum256([]byte(key))
		b.WriteString(":h:")
		b.WriteString(base64.RawURLEncoding.EncodeToString(sum[:]))
	}
	return b.String()
}

// failed is Allow's answer when Redis could not keep the count.
func (r *Redis) failed(err error) (bool, time.Duration, error) {
	r.warn(err)
	if r.failOpen {
		return true, 0, nil
	}
	return false, 0, fmt.Errorf("ratelimit: redis at %s: %w", r.addr, err)
}

// warn logs err unless a warning went out within warnEvery; the next one
// counts the failures in between.
func (r *Redis) warn(err error) {
	now := r.now()
	r.mu.Lock()
	r.unreported++
	if !r.lastWarn.IsZero() && now.Sub(r.lastWarn) < warnEvery {
		r.mu.Unlock()
		return
	}
	n := r.unreported
	r.lastWarn, r.unreported = now, 0
	r.mu.Unlock()
	msg := "rate-limit count unavailable: refusing limited calls"
	if r.failOpen {
		msg = "rate-limit count unavailable: admitting calls unlimited (fail open)"
	}
	text := err.Error()
	if len(text) > maxLoggedText {
		text = text[:maxLoggedText] + "…"
	}
	r.log.Warn(msg, "redis", r.addr, "error", text, "failures", n)
}

// Ping checks that Redis answers, within the counter's timeout.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ratelimit: redis at %s: %w", r.addr, err)
	}
	return nil
}

// quietClientLog routes go-redis's own log lines, process-wide, to slog
// at debug level: it writes one line per failed dial, unthrottled, while
// the counter reports failures itself, at most once per warnEvery.
var quietClientLog sync.Once

type debugLog struct{}

func (debugLog) Printf(ctx context.Context, format string, v ...any) {
	text := fmt.Sprintf(format, v...)
	if len(text) > maxLoggedText {
		text = text[:maxLoggedText] + "…"
	}
	slog.DebugContext(ctx, "redis client", "message", text)
}

// Close closes the connections to Redis.
func (r *Redis) Close() error { return r.rdb.Close() }
