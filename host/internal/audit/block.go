package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Records are stored in blocks: one row holds up to maxBlockRecords
// records of one append, encoded together, with the range of their seqs
// and times and the set of values the filters match (keys). Writing a
// record then costs its encoding, not a row and six index entries: on
// SQLite a row per record took about 36 µs of the host's CPU, a block
// under 2 µs a record, bounding and encoding included. A query selects blocks by seq, time and keys, and
// filters their records exactly.

// maxBlockRecords bounds a block, so a query decodes little more than the
// page it reads. The writer's default batch fits in one.
const maxBlockRecords = 512

// blockVersion is the first byte of a block's body: the layout of what
// follows. Layout 1 has the first 17 fields of fieldsOf (no ApprovalID);
// blocks written so are still read.
const blockVersion = 2

// fieldsIn is how many string fields a record has in layout v.
func fieldsIn(v byte) int {
	if v == 1 {
		return 17
	}
	return numFields
}

// errCorrupt marks a stored block that does not decode.
var errCorrupt = errors.New("corrupt audit block")

// block is one row of audit_blocks.
type block struct {
	first, last      int64 // seqs of the first and last record
	count            int
	minTime, maxTime time.Time
	keys             string
	body             []byte
}

// numFields is how many string fields a record has (Args apart).
const numFields = 18

// fieldsOf lists r's string fields in the order a block holds them.
func fieldsOf(r *Record) [numFields]*string {
	return [numFields]*string{&r.ID, &r.ParentID, &r.RequestID, &r.Protocol, &r.ProtocolVersion, &r.TokenLabel,
		&r.Role, &r.Scope, &r.UserID, &r.Capability, &r.Plugin, (*string)(&r.Decision), &r.Step, &r.Reason,
		(*string)(&r.Outcome), &r.ErrorCode, &r.ErrorRef, &r.ApprovalID}
}

// A record in a block is its seq delta (uvarint) from the block's first
// record, its time (varint, Unix microseconds) and latency (uvarint,
// nanoseconds), then each of the numFields strings and Args as a uvarint
// n: 0 when the value is the previous record's, else n-1 bytes of value.
// Calls of one client repeat most fields (protocol, principal,
// capability, outcome), so a record takes about half the bytes.

// builder encodes a block a record at a time: the store encodes the
// records of an Append, and a Writer each record as Write takes it, so
// that its queue holds bytes rather than records for the collector to
// scan.
type builder struct {
	body  []byte
	count int
	// minTime and maxTime are Unix microseconds, as the body holds times.
	minTime, maxTime int64
	keys             keySet
	// prev and prevArgs are the previous record's values.
	prev     [numFields]string
	prevArgs []byte
}

// add appends r at seq first+delta. r is normalized, or, with raw set,
// validated: then add bounds the fields it writes (the time is kept to
// the microsecond either way), and a field equal to the previous record's is that record's,
// bounded already (bounding is idempotent), which spares most of them.
func (b *builder) add(delta uint64, r *Record, raw bool) {
	if len(b.body) == 0 {
		if b.body == nil {
			b.body = make([]byte, 0, 4096)
		}
		b.body = append(b.body, blockVersion)
	}
	b.body = binary.AppendUvarint(b.body, delta)
	at := r.Time.UnixMicro()
	b.body = binary.AppendVarint(b.body, at)
	b.body = binary.AppendUvarint(b.body, uint64(r.Latency))
	for i, f := range fieldsOf(r) {
		if b.count > 0 && *f == b.prev[i] {
			b.body = append(b.body, 0)
			continue
		}
		if raw {
			*f = bound(*f, fieldBounds[i])
		}
		b.body = binary.AppendUvarint(b.body, uint64(len(*f))+1)
		b.body = append(b.body, *f...)
		b.prev[i] = *f
	}
	if b.count > 0 && bytes.Equal(r.Args, b.prevArgs) {
		b.body = append(b.body, 0)
	} else {
		if raw {
			r.Args = capArgs(r.Args, MaxArgs)
		}
		b.body = binary.AppendUvarint(b.body, uint64(len(r.Args))+1)
		start := len(b.body)
		b.body = append(b.body, r.Args...)
		b.prevArgs = b.body[start:len(b.body):len(b.body)]
	}
	if b.count == 0 || at < b.minTime {
		b.minTime = at
	}
	if b.count == 0 || at > b.maxTime {
		b.maxTime = at
	}
	b.count++
	b.keys.add(r)
}

// block is the row of the built block, whose records have seqs first to
// last.
func (b *builder) block(first, last int64) block {
	return block{first: first, last: last, count: b.count, minTime: time.UnixMicro(b.minTime).UTC(), maxTime: time.UnixMicro(b.maxTime).UTC(),
		keys: b.keys.String(), body: b.body}
}

// encodeBlock encodes records (normalized, Seq set and increasing), which
// retention and conversion keep with the seqs they have.
func encodeBlock(rs []Record) block {
	var b builder
	for i := range rs {
		b.add(uint64(rs[i].Seq-rs[0].Seq), &rs[i], false)
	}
	return b.block(rs[0].Seq, rs[len(rs)-1].Seq)
}

// decodeBlock decodes the body of the block whose first record has seq
// first. A body that does not decode is errCorrupt, never a panic.
func decodeBlock(first int64, body []byte) ([]Record, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w at seq %d: %s", errCorrupt, first, what)
	}
	if len(body) == 0 || (body[0] != 1 && body[0] != blockVersion) {
		return nil, bad("unknown layout")
	}
	nf := fieldsIn(body[0])
	d := decoder{b: body[1:]}
	var (
		rs       []Record
		prev     = int64(-1)
		prevF    [numFields]string
		prevArgs []byte
	)
	for len(d.b) > 0 {
		var r Record
		delta := d.uvarint()
		micros := d.varint()
		latency := d.uvarint()
		fields := fieldsOf(&r)
		for i, f := range fields[:nf] {
			v, same := d.value()
			switch {
			case same && len(rs) == 0:
				d.fail("the first record repeats a value")
			case same:
				*f = prevF[i]
			default:
				*f = string(v)
				prevF[i] = *f
			}
		}
		if v, same := d.value(); same && len(rs) == 0 {
			d.fail("the first record repeats a value")
		} else if same {
			r.Args = prevArgs
		} else if len(v) > 0 {
			r.Args = slices.Clone(v)
			prevArgs = r.Args
		} else {
			prevArgs = nil
		}
		switch {
		case d.err != "":
			return nil, bad(fmt.Sprintf("record %d: %s", len(rs)+1, d.err))
		case len(rs) == 0 && delta != 0:
			return nil, bad("the first record is not at the block's seq")
		case delta > 1<<62 || int64(delta) <= prev:
			return nil, bad(fmt.Sprintf("record %d: seqs out of order", len(rs)+1))
		case latency > 1<<63-1:
			return nil, bad(fmt.Sprintf("record %d: latency out of range", len(rs)+1))
		}
		prev = int64(delta)
		r.Seq = first + int64(delta)
		r.Time = time.UnixMicro(micros).UTC()
		r.Latency = time.Duration(latency)
		rs = append(rs, r)
		if len(rs) > maxBlockRecords {
			return nil, bad("more records than a block holds")
		}
	}
	if len(rs) == 0 {
		return nil, bad("no records")
	}
	return rs, nil
}

// decoder reads a body; the first fault sticks in err and every later
// read returns zero.
type decoder struct {
	b   []byte
	err string
}

func (d *decoder) uvarint() uint64 {
	if d.err != "" {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = "bad number"
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != "" {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = "bad number"
		return 0
	}
	d.b = d.b[n:]
	return v
}

// value reads a field: its bytes, or same when it repeats the previous
// record's.
func (d *decoder) value() (v []byte, same bool) {
	n := d.uvarint()
	if d.err != "" {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	n--
	if n > uint64(len(d.b)) {
		d.fail("field runs past the end")
		return nil, false
	}
	v, d.b = d.b[:n], d.b[n:]
	return v, false
}

func (d *decoder) fail(why string) {
	if d.err == "" {
		d.err = why
	}
}

// Keys: the values a block's records hold for each exact-match filter,
// each written as keySep kind ':' value keySep, so a filter selects the
// blocks whose keys contain its needle. A value holding keySep has it
// replaced in both the key and the needle: at worst a block is read and
// found not to match, never skipped.
const keySep = "\x1f"

// Kinds of key.
const (
	keyToken      = 't'
	keyUser       = 'u'
	keyCapability = 'c'
	keyRequest    = 'r'
	keyDecision   = 'd'
	keyStep       = 's'
	keyApproval   = 'a'
)

type key struct {
	kind  byte
	value string
}

func recordKeys(r *Record) [7]key {
	return [7]key{{keyToken, r.TokenLabel}, {keyUser, r.UserID}, {keyCapability, r.Capability},
		{keyRequest, r.RequestID}, {keyDecision, string(r.Decision)}, {keyStep, r.Step}, {keyApproval, r.ApprovalID}}
}

// keySet collects the keys of a block's records in first-seen order,
// each once but for request ids.
type keySet struct {
	seen map[key]struct{}
	sb   strings.Builder
	// last holds the previous record's keys: most records repeat them,
	// and comparing is cheaper than hashing.
	last [7]key
}

func (ks *keySet) add(r *Record) {
	if ks.seen == nil {
		ks.seen = make(map[key]struct{}, 16)
		ks.sb.WriteString(keySep)
	}
	for i, k := range recordKeys(r) {
		if k.value == "" || k == ks.last[i] {
			continue
		}
		ks.last[i] = k
		// Request ids are nearly all distinct: a repeat costs a few bytes,
		// a set of them an insert a record.
		if k.kind != keyRequest {
			if _, ok := ks.seen[k]; ok {
				continue
			}
			ks.seen[k] = struct{}{}
		}
		ks.sb.WriteByte(k.kind)
		ks.sb.WriteByte(':')
		ks.sb.WriteString(keyValue(k.value))
		ks.sb.WriteString(keySep)
	}
}

func (ks *keySet) String() string { return ks.sb.String() }

// needle is what the keys of a block holding value for kind contain.
func needle(kind byte, value string) string {
	return keySep + string(kind) + ":" + keyValue(value) + keySep
}

func keyValue(v string) string {
	if strings.Contains(v, keySep) {
		return strings.ReplaceAll(v, keySep, "\uFFFD")
	}
	return v
}
