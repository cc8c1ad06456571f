package audit

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// IDLen is the length of an ID from NewID.
const IDLen = 26

// crockford is Crockford's base32 alphabet: no I, L, O, U, so an ID reads
// aloud and sorts as text in the order of its bytes.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// idGen keeps IDs of one process strictly increasing, also within one
// millisecond and when the clock steps back, without a lock: calls on
// every core take IDs, and a lock (or a fresh random draw each
// millisecond) would make them wait on one another.
var idGen = newIDState()

type idState struct {
	// ms is the latest millisecond an ID was made for. It never goes back,
	// so a clock stepping back does not make IDs smaller.
	ms atomic.Uint64
	// lo is the low 64 of the 80 bits after the time: it counts up from a
	// random start, so each ID of the process has its own, and another
	// process's IDs of the same millisecond (their own random start and
	// hi) almost surely differ.
	lo atomic.Uint64
	hi uint16 // bits 79..64, random, the process's own
}

func newIDState() *idState {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	s := &idState{hi: binary.BigEndian.Uint16(b[:2])}
	// Half the range left as headroom: at a million IDs a second, 2^63
	// takes about 290,000 years to use up.
	s.lo.Store(binary.BigEndian.Uint64(b[2:]) >> 1)
	return s
}

// NewID returns a new record ID for an event at t: 26 characters of
// Crockford base32 over 48 bits of Unix milliseconds and 80 bits that
// start random in each process and count up (the ULID layout, with its
// monotonic form). IDs sort as text by time across processes (to the
// clocks' agreement) and strictly increase within one process: an ID
// taken after another returned has a later or equal millisecond and a
// larger count.
func NewID(t time.Time) string {
	ms := uint64(t.UnixMilli()) & (1<<48 - 1)
	for {
		last := idGen.ms.Load()
		if ms <= last {
			// Same millisecond, or the clock stepped back: the count keeps
			// the ID increasing.
			ms = last
			break
		}
		if idGen.ms.CompareAndSwap(last, ms) {
			break
		}
	}
	return encodeID(ms, idGen.hi, idGen.lo.Add(1))
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

// idParts is an ID of NewID's form as its numbers; ok is false for any
// other string.
type idParts struct {
	ms, lo uint64
	hi     uint16
	ok     bool
}

// crockfordValue maps a byte to its digit in crockford, or 0xff: only
// the upper-case digits NewID writes, so that parsing and encoding are
// each other's inverse.
var crockfordValue = func() (v [256]byte) {
	for i := range v {
		v[i] = 0xff
	}
	for i := range len(crockford) {
		v[crockford[i]] = byte(i)
	}
	return v
}()

// parseID reads an ID of NewID's form: encodeID of the parts gives s back.
// For any other string the parts are not ok.
func parseID(s string) idParts {
	// The first digit holds the top 3 of 128 bits: 8 or more would be a
	// 131st bit, which encodeID cannot write.
	if len(s) != IDLen || crockfordValue[s[0]] > 7 {
		return idParts{}
	}
	var top, lo uint64
	for i := range IDLen {
		v := crockfordValue[s[i]]
		if v == 0xff {
			return idParts{}
		}
		top = top<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	return idParts{ms: top >> 16, hi: uint16(top), lo: lo, ok: true}
}
