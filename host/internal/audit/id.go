package audit

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// IDLen is the length of an ID from NewID.
const IDLen = 26

// crockford is Crockford's base32 alphabet: no I, L, O, U, so an ID reads
// aloud and sorts as text in the order of its bytes.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// idGen keeps IDs of one process strictly increasing, also within one
// millisecond and when the clock steps back.
var idGen struct {
	mu   sync.Mutex
	ms   uint64
	hi   uint16 // random bits 79..64
	lo   uint64 // random bits 63..0
	used bool
}

// NewID returns a new record ID for an event at t: 26 characters of
// Crockford base32 over 48 bits of Unix milliseconds and 80 random bits
// (the ULID layout). IDs sort as text by time across processes (to the
// clocks' agreement) and strictly increase within one process: a second ID
// in the same millisecond is the previous one plus one.
func NewID(t time.Time) string {
	ms := uint64(t.UnixMilli()) & (1<<48 - 1)
	idGen.mu.Lock()
	defer idGen.mu.Unlock()
	if idGen.used && ms <= idGen.ms {
		// Same millisecond, or the clock stepped back: keep increasing.
		ms = idGen.ms
		idGen.lo++
		if idGen.lo == 0 {
			idGen.hi++
			if idGen.hi == 0 {
				// 2^80 IDs in one millisecond: move to the next one.
				ms++
			}
		}
	} else {
		var b [10]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		idGen.hi = binary.BigEndian.Uint16(b[:2])
		// Leave headroom so increments within the millisecond rarely carry.
		idGen.lo = binary.BigEndian.Uint64(b[2:]) >> 1
	}
	idGen.ms, idGen.used = ms, true
	return encodeID(ms, idGen.hi, idGen.lo)
}

// encodeID writes the 128 bits ms(48) hi(16) lo(64) as 26 base32 digits,
// the first carrying the top 3 bits.
func encodeID(ms uint64, hi uint16, lo uint64) string {
	// The 128-bit value as two 64-bit halves.
	top := ms<<16 | uint64(hi)
	var out [IDLen]byte
	for i := IDLen - 1; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | top<<59
		top >>= 5
	}
	return string(out[:])
}
