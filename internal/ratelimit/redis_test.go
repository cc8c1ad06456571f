package ratelimit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capgate/capgate/internal/dispatch"
)

// envRedisURL names the environment variable holding the test Redis's URL.
const envRedisURL = "CAPGATE_TEST_REDIS_URL"

// defaultRedisURL is the Redis used when envRedisURL is unset.
const defaultRedisURL = "redis://127.0.0.1:6379/0"

// closedPort is an address nothing listens on.
const closedPort = "127.0.0.1:1"

// redisURL returns the test Redis's URL after checking it answers. When it
// does not, the test is skipped saying so — unless env CI is set: CI must
// provide Redis, so there the test fails instead.
func redisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(envRedisURL)
	if u == "" {
		u = defaultRedisURL
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("%s: %v", envRedisURL, err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		msg := "no Redis at " + o.Addr + " (set " + envRedisURL + " to another server): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI must provide it", msg)
		}
		t.Skip(msg)
	}
	return u
}

// testPrefix returns a key prefix of a fresh random name and deletes every
// key under it at the test's cleanup.
func testPrefix(t testing.TB, url string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "capgate-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		o, _ := redis.ParseURL(url)
		c := redis.NewClient(o)
		defer c.Close()
		ctx := context.Background()
		keys, err := c.Keys(ctx, "rate:"+prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = c.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("clean up %s: %v", prefix, err)
		}
	})
	return prefix
}

// newTestRedis is a counter on the test Redis under prefix.
func newTestRedis(t testing.TB, url, prefix string) *Redis {
	t.Helper()
	// A roomy timeout: the machine is shared, and a timed-out call would
	// be an error here, not a decision.
	r, err := NewRedis(url, RedisOptions{Prefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func redisAllow(t *testing.T, r *Redis, key dispatch.LimitKey, rate dispatch.Rate) (bool, time.Duration) {
	t.Helper()
	ok, wait, err := r.Allow(context.Background(), key, rate)
	if err != nil {
		t.Fatal(err)
	}
	return ok, wait
}

// TestRedisBurstThenRefusal: the burst is admitted, the next call is
// refused with the time one share takes to come back, a refused call takes
// nothing, and the count's key expires once it would be full again.
func TestRedisBurstThenRefusal(t *testing.T) {
	url := redisURL(t)
	prefix := testPrefix(t, url)
	r := newTestRedis(t, url, prefix)
	if err := r.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	rate := dispatch.Rate{Count: 3, Per: time.Hour} // a share comes back every 20 minutes
	for i := range 3 {
		if ok, _ := redisAllow(t, r, dispatch.LimitKey{Token: "tok", Capability: "cap"}, rate); !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
	}
	ok, wait := redisAllow(t, r, dispatch.LimitKey{Token: "tok", Capability: "cap"}, rate)
	if ok || wait <= 19*time.Minute || wait > 20*time.Minute {
		t.Fatalf("fourth call: ok=%v wait=%v, want refused for about 20m", ok, wait)
	}
	if ok, again := redisAllow(t, r, dispatch.LimitKey{Token: "tok", Capability: "cap"}, rate); ok || again > wait || again <= 19*time.Minute {
		t.Fatalf("asked again: ok=%v wait=%v after %v: a refusal took from the count", ok, again, wait)
	}
	if ok, _ := redisAllow(t, r, dispatch.LimitKey{Token: "tok", Capability: "other"}, rate); !ok {
		t.Fatal("another key shares the count")
	}
	key := r.redisKey(dispatch.LimitKey{Token: "tok", Capability: "cap"}.String(), limitOf(rate))
	ttl, err := r.rdb.TTL(context.Background(), "rate:"+key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("key expires in %v, want the hour an empty burst takes to refill", ttl)
	}
}

// TestRedisReplicasShareOneLimit: two counters on one Redis — two
// replicas — admit the limit exactly once between them.
func TestRedisReplicasShareOneLimit(t *testing.T) {
	url := redisURL(t)
	prefix := testPrefix(t, url)
	a, b := newTestRedis(t, url, prefix), newTestRedis(t, url, prefix)
	rate := dispatch.Rate{Count: 10, Per: time.Hour, Burst: 10}
	admitted := 0
	for i := range 10 {
		replica := a
		if i%2 == 1 {
			replica = b
		}
		if ok, _ := redisAllow(t, replica, dispatch.LimitKey{Token: "tok"}, rate); ok {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("admitted %d of the first 10 calls across the replicas", admitted)
	}
	for name, replica := range map[string]*Redis{"a": a, "b": b} {
		if ok, wait := redisAllow(t, replica, dispatch.LimitKey{Token: "tok"}, rate); ok || wait <= 0 {
			t.Errorf("replica %s admitted an 11th call (ok=%v wait=%v)", name, ok, wait)
		}
	}
	// Another prefix is another deployment: it counts apart.
	other := newTestRedis(t, url, testPrefix(t, url))
	if ok, _ := redisAllow(t, other, dispatch.LimitKey{Token: "tok"}, rate); !ok {
		t.Error("a deployment with another prefix shares the count")
	}
}

// TestRedisRateChange: a changed rate (a reloaded config) starts the key's
// count afresh; the same rate written another way keeps it.
func TestRedisRateChange(t *testing.T) {
	url := redisURL(t)
	r := newTestRedis(t, url, testPrefix(t, url))
	slow := dispatch.Rate{Count: 1, Per: time.Hour}
	if ok, _ := redisAllow(t, r, dispatch.LimitKey{Token: "k"}, slow); !ok {
		t.Fatal("first call refused")
	}
	if ok, _ := redisAllow(t, r, dispatch.LimitKey{Token: "k"}, slow); ok {
		t.Fatal("second call within the hour admitted")
	}
	if ok, _ := redisAllow(t, r, dispatch.LimitKey{Token: "k"}, dispatch.Rate{Count: 1, Per: time.Hour, Burst: 1}); ok {
		t.Fatal("burst 1 written out started a fresh count for the same rate")
	}
	for _, changed := range []dispatch.Rate{
		{Count: 2, Per: time.Hour},
		{Count: 1, Per: time.Minute},
		{Count: 1, Per: time.Hour, Burst: 2},
	} {
		if ok, _ := redisAllow(t, r, dispatch.LimitKey{Token: "k"}, changed); !ok {
			t.Errorf("new rate %v kept the old, empty count", changed)
		}
	}
}

// TestRedisLongAndOddKeys: keys of any bytes and any length are counted,
// each apart, including long keys differing only in their last byte.
func TestRedisLongAndOddKeys(t *testing.T) {
	url := redisURL(t)
	r := newTestRedis(t, url, testPrefix(t, url))
	rate := dispatch.Rate{Count: 1, Per: time.Hour}
	long := strings.Repeat("x", 10_000)
	for _, token := range []string{"", "\x00", "\x00\x00", "a b\r\n*3", "\xff\xfe", long + "1", long + "2"} {
		key := dispatch.LimitKey{Token: token}
		if ok, _ := redisAllow(t, r, key, rate); !ok {
			t.Errorf("first call of token %.20q refused: it shares another's count", token)
		}
		if ok, _ := redisAllow(t, r, key, rate); ok {
			t.Errorf("second call of token %.20q admitted: it is not counted", token)
		}
	}
}

// TestRedisKeys: the Redis key is bounded and printable, carries the
// prefix and the effective rate, and keeps distinct keys distinct, also
// across the bound where keys start to be hashed.
func TestRedisKeys(t *testing.T) {
	r, err := NewRedis("redis://"+closedPort, RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lim := limitOf(dispatch.Rate{Count: 10, Per: time.Minute})
	seen := map[string]string{}
	for _, key := range []string{
		"", "a", "a\x00", "\x00a", dispatch.LimitKey{Token: "tok", Capability: "cap"}.String(), dispatch.LimitKey{Token: "tok"}.String(),
		strings.Repeat("y", maxPlainKey-1), strings.Repeat("y", maxPlainKey), strings.Repeat("y", maxPlainKey+1),
		strings.Repeat("y", maxPlainKey+2), strings.Repeat("\xff", 1<<16),
	} {
		rk := r.redisKey(key, lim)
		if !strings.HasPrefix(rk, DefaultRedisPrefix+"10/1m0s/10:") {
			t.Errorf("key %.20q: %q lacks the prefix and rate", key, rk)
		}
		if len(rk) > 200 {
			t.Errorf("key of %d bytes: Redis key of %d", len(key), len(rk))
		}
		for _, c := range []byte(rk) {
			if c <= ' ' || c > '~' {
				t.Errorf("key %.20q: Redis key %q has byte %#x", key, rk, c)
				break
			}
		}
		if prev, dup := seen[rk]; dup {
			t.Errorf("keys %.20q and %.20q share Redis key %q", prev, key, rk)
		}
		seen[rk] = key
	}
	if a, b := r.redisKey("k", lim), r.redisKey("k", limitOf(dispatch.Rate{Count: 10, Per: time.Minute, Burst: 5})); a == b {
		t.Errorf("two bursts share Redis key %q", a)
	}
}

// TestRedisConcurrent: concurrent callers on two replicas are admitted
// exactly the burst between them.
func TestRedisConcurrent(t *testing.T) {
	url := redisURL(t)
	prefix := testPrefix(t, url)
	replicas := []*Redis{newTestRedis(t, url, prefix), newTestRedis(t, url, prefix)}
	rate := dispatch.Rate{Count: 100, Per: time.Hour}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
		errs     []error
	)
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				ok, _, err := replicas[i%2].Allow(context.Background(), dispatch.LimitKey{Token: "k"}, rate)
				mu.Lock()
				if ok {
					admitted++
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if admitted != 100 {
		t.Errorf("admitted %d of 400 calls, want the burst of 100", admitted)
	}
}

// logBuffer is a logger writing text lines to a buffer safe for
// concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// silentServer accepts connections and never answers: a Redis that hangs.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestRedisDown: with nothing at the address, or a Redis that never
// answers, fail-open admits and fail-closed returns an error, both within
// the timeout; each logs a warning at most once per interval, counting the
// failures in between, and neither the errors nor the logs carry the
// URL's password.
func TestRedisDown(t *testing.T) {
	for name, addr := range map[string]string{"closed port": closedPort, "silent": silentServer(t)} {
		t.Run(name, func(t *testing.T) { testRedisDown(t, addr) })
	}
}

func testRedisDown(t *testing.T, addr string) {
	const password = "s3cret-pass"
	rate := dispatch.Rate{Count: 1, Per: time.Hour}
	for _, failOpen := range []bool{true, false} {
		var logs logBuffer
		r, err := NewRedis("redis://user:"+password+"@"+addr+"/0",
			RedisOptions{FailOpen: failOpen, Timeout: 100 * time.Millisecond, Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		c := &clock{t: time.Unix(1_000_000, 0)}
		r.now = c.now
		for i := range 3 {
			ok, wait, err := r.Allow(context.Background(), dispatch.LimitKey{Token: "k"}, rate)
			if failOpen && (!ok || wait != 0 || err != nil) {
				t.Fatalf("fail-open, call %d: ok=%v wait=%v err=%v, want admitted", i+1, ok, wait, err)
			}
			if !failOpen {
				if ok || err == nil || !strings.Contains(err.Error(), addr) {
					t.Fatalf("fail-closed, call %d: ok=%v err=%v, want an error naming %s", i+1, ok, err, addr)
				}
				if strings.Contains(err.Error(), password) {
					t.Fatalf("error carries the password: %v", err)
				}
			}
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Fatalf("fail-open=%v: %d warnings for 3 failures within the interval, want 1:\n%s", failOpen, n, logs.String())
		}
		c.advance(warnEvery)
		_, _, _ = r.Allow(context.Background(), dispatch.LimitKey{Token: "k"}, rate)
		out := logs.String()
		if n := strings.Count(out, "level=WARN"); n != 2 {
			t.Fatalf("fail-open=%v: %d warnings after the interval, want 2:\n%s", failOpen, n, out)
		}
		if !strings.Contains(out, "failures=3") || !strings.Contains(out, "redis="+addr) {
			t.Errorf("the second warning does not count the failures since the first or name Redis:\n%s", out)
		}
		if want := map[bool]string{true: "fail open", false: "refusing"}[failOpen]; !strings.Contains(out, want) {
			t.Errorf("warning does not say %q:\n%s", want, out)
		}
		if strings.Contains(out, password) {
			t.Errorf("log carries the password:\n%s", out)
		}
		if err := r.Ping(context.Background()); err == nil || strings.Contains(err.Error(), password) {
			t.Errorf("Ping: %v, want an error without the password", err)
		}
	}
}

// TestRedisWrongPassword: a Redis that refuses the credentials is an error
// at Ping and at Allow, neither repeating the password.
func TestRedisWrongPassword(t *testing.T) {
	url := redisURL(t)
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	const password = "not-the-password-7"
	var logs logBuffer
	r, err := NewRedis("redis://nobody:"+password+"@"+o.Addr, RedisOptions{Timeout: 2 * time.Second, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Ping(context.Background()); err == nil || strings.Contains(err.Error(), password) {
		t.Errorf("Ping: %v, want an error without the password", err)
	}
	_, _, err = r.Allow(context.Background(), dispatch.LimitKey{Token: "k"}, dispatch.Rate{Count: 1, Per: time.Hour})
	if err == nil || strings.Contains(err.Error(), password) {
		t.Errorf("Allow: %v, want an error without the password", err)
	}
	if out := logs.String(); !strings.Contains(out, "WRONGPASS") || strings.Contains(out, password) {
		t.Errorf("want a warning of the refusal without the password:\n%s", out)
	}
}

// TestRedisCallerLeaves: a call whose context has ended gets the
// context's error, also when failing open, and logs nothing.
func TestRedisCallerLeaves(t *testing.T) {
	var logs logBuffer
	r, err := NewRedis("redis://"+closedPort, RedisOptions{FailOpen: true, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok, _, err := r.Allow(ctx, dispatch.LimitKey{Token: "k"}, dispatch.Rate{Count: 1, Per: time.Hour})
	if ok || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: ok=%v err=%v, want refused with context.Canceled", ok, err)
	}
	if out := logs.String(); out != "" {
		t.Errorf("a caller leaving was logged as Redis failing:\n%s", out)
	}
}

// TestNewRedisRejects: bad URLs and options are clear errors that never
// repeat the password.
func TestNewRedisRejects(t *testing.T) {
	for _, tc := range []struct {
		url  string
		opts RedisOptions
		want string
	}{
		{"http://user:pw-one@127.0.0.1:6379", RedisOptions{}, `scheme "http": want redis:// or rediss://`},
		{"127.0.0.1:6379", RedisOptions{}, "want redis:// or rediss://"},
		{"", RedisOptions{}, "want redis:// or rediss://"},
		{"unix:///tmp/redis.sock", RedisOptions{}, `scheme "unix"`},
		{"redis://user:pw-two@127.0.0.1:port/0", RedisOptions{}, "invalid port"},
		{"redis://user:pw-three@127.0.0.1:6379/db", RedisOptions{}, "invalid database number"},
		{"redis://127.0.0.1:6379?bogus=1", RedisOptions{}, "bogus"},
		{"redis://127.0.0.1:6379", RedisOptions{Prefix: "has space:"}, "prefix"},
		{"redis://127.0.0.1:6379", RedisOptions{Prefix: "bad\x00"}, "prefix"},
		{"redis://127.0.0.1:6379", RedisOptions{Prefix: strings.Repeat("p", maxPrefixLen+1)}, "prefix"},
		{"redis://127.0.0.1:6379", RedisOptions{Timeout: -time.Second}, "timeout"},
		{"redis://127.0.0.1:6379", RedisOptions{Timeout: time.Minute}, "timeout"},
	} {
		r, err := NewRedis(tc.url, tc.opts)
		if err == nil {
			_ = r.Close()
			t.Errorf("NewRedis(%q, %+v): no error", tc.url, tc.opts)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRedis(%q): %v, want it to say %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), "pw-") {
			t.Errorf("NewRedis(%q): error carries the password: %v", tc.url, err)
		}
	}
}

// TestRedisRejectsBadRate: a rate that counts nothing is an error, never a
// panic or a division by zero in Redis.
func TestRedisRejectsBadRate(t *testing.T) {
	r, err := NewRedis("redis://"+closedPort, RedisOptions{FailOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, rate := range []dispatch.Rate{{}, {Count: -1, Per: time.Second}, {Count: 1}, {Count: 1, Per: time.Second, Burst: -1}} {
		if ok, _, err := r.Allow(context.Background(), dispatch.LimitKey{Token: "k"}, rate); ok || err == nil {
			t.Errorf("rate %+v: ok=%v err=%v, want an error", rate, ok, err)
		}
	}
}

// TestRedisURLFromNet: rediss:// parses (its TLS is Redis's concern) and
// the counter names Redis by its address.
func TestRedisURLFromNet(t *testing.T) {
	r, err := NewRedis("rediss://:pw@cache.example:6380/2", RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if host, port, _ := net.SplitHostPort(r.addr); host != "cache.example" || port != "6380" {
		t.Errorf("addr %q, want cache.example:6380", r.addr)
	}
	if r.rdb.Options().TLSConfig == nil {
		t.Error("rediss:// without TLS")
	}
}
