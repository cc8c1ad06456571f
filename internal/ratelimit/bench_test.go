package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
)

// benchKeys are the keys the benchmarks spread their calls over, shaped
// like the gate's, so the counters hold many buckets as they would.
var benchKeys = func() []dispatch.LimitKey {
	keys := make([]dispatch.LimitKey, 1024)
	for i := range keys {
		keys[i] = dispatch.LimitKey{Token: "token-" + strconv.Itoa(i), Capability: "booking.create"}
	}
	return keys
}()

// benchRate admits every call of the benchmarks, so each one is counted.
var benchRate = dispatch.Rate{Count: 1_000_000, Per: time.Second}

// benchAllow measures one Allow, serially and from parallel callers. The
// two counters run through the same function so their costs compare.
func benchAllow(b *testing.B, l dispatch.Limiter) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, _, err := l.Allow(ctx, benchKeys[i%len(benchKeys)], benchRate); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, _, err := l.Allow(ctx, benchKeys[i%len(benchKeys)], benchRate); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
}

func BenchmarkMemoryAllow(b *testing.B) { benchAllow(b, NewMemory()) }

func BenchmarkRedisAllow(b *testing.B) {
	url := redisURL(b)
	benchAllow(b, newTestRedis(b, url, testPrefix(b, url)))
}
