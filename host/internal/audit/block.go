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
// under 2 µs a record, bounding and encoding included. A query selects
// blocks by seq, time and keys, and filters their records exactly.

// maxBlockRecords bounds a block, so a query decodes little more than the
// page it reads. The writer's default batch fits in one.
const maxBlockRecords = 512

// blockVersion is the first byte of a block's body: the layout of what
// follows. Blocks of layouts 1 and 2 (see decodeRepeats) are still read;
// a binary from before layout 3 cannot read the blocks written now.
const blockVersion = 3

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

// Layout 3. A record is its seq delta (uvarint) from the block's first
// record; its time as the difference (varint, microseconds) from the
// previous record's, the first's from the Unix epoch; its latency
// (uvarint, nanoseconds); a mask (uvarint) of what differs from the
// previous record, whose values all start empty; with maskIDStep, the
// ID's steps (two varints); then, in the mask's order, each value that
// differs as a uvarint length and its bytes.
//
// Calls of one client repeat most fields (protocol, principal,
// capability, outcome), and the store's cost grows with a block's bytes,
// so a record spends nothing on a repeated value. Its ID, new in every
// record, is usually the writer's NewID one or two counts after the
// previous record's: maskIDStep then stands for it, as the differences of
// its millisecond and its count, a few bytes rather than 26.
//
// The mask's bits, the likeliest first so that it mostly takes one byte:
// maskIDStep, then field i of fieldsOf at bit i+1 (fieldBit), then
// maskArgs.
const (
	maskIDStep = 1                    // the ID as a step from the previous
	maskArgs   = 1 << (numFields + 1) // Args differ
	maskAll    = 1<<(numFields+2) - 1
)

// fieldBit is the mask's bit for field i of fieldsOf.
func fieldBit(i int) uint64 { return 1 << (i + 1) }

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
	// prev, prevArgs, prevTime and prevID are the previous record's
	// values, empty before the first.
	prev     [numFields]string
	prevArgs []byte
	prevTime int64
	prevID   idParts
}

// add appends r at seq first+delta. r is normalized, or, with raw set,
// validated: then add bounds the fields it writes (the time is kept to
// the microsecond either way). A field equal to the previous record's is
// that record's, bounded already (bounding is idempotent), which spares
// most of them.
func (b *builder) add(delta uint64, r *Record, raw bool) {
	if len(b.body) == 0 {
		if b.body == nil {
			b.body = make([]byte, 0, 4096)
		}
		b.body = append(b.body, blockVersion)
	}
	fields := fieldsOf(r)
	var mask uint64
	for i, f := range fields {
		if *f == b.prev[i] {
			continue
		}
		if raw {
			*f = bound(*f, fieldBounds[i])
		}
		if *f != b.prev[i] {
			mask |= fieldBit(i)
		}
	}
	if !bytes.Equal(r.Args, b.prevArgs) {
		if raw {
			r.Args = capArgs(r.Args, MaxArgs)
		}
		if !bytes.Equal(r.Args, b.prevArgs) {
			mask |= maskArgs
		}
	}
	id := parseID(r.ID)
	if mask&fieldBit(0) != 0 && id.ok && b.prevID.ok && id.hi == b.prevID.hi {
		mask = mask&^fieldBit(0) | maskIDStep
	}
	at := r.Time.UnixMicro()
	b.body = binary.AppendUvarint(b.body, delta)
	b.body = binary.AppendVarint(b.body, at-b.prevTime)
	b.body = binary.AppendUvarint(b.body, uint64(r.Latency))
	b.body = binary.AppendUvarint(b.body, mask)
	if mask&maskIDStep != 0 {
		// Differences in two's complement: exact whatever their sign
		// (a nested call's record comes before its parent's).
		b.body = binary.AppendVarint(b.body, int64(id.ms-b.prevID.ms))
		b.body = binary.AppendVarint(b.body, int64(id.lo-b.prevID.lo))
		b.prev[0] = r.ID
	}
	for i, f := range fields {
		if mask&fieldBit(i) != 0 {
			b.body = binary.AppendUvarint(b.body, uint64(len(*f)))
			b.body = append(b.body, *f...)
			b.prev[i] = *f
		}
	}
	if mask&maskArgs != 0 {
		b.body = binary.AppendUvarint(b.body, uint64(len(r.Args)))
		start := len(b.body)
		b.body = append(b.body, r.Args...)
		b.prevArgs = b.body[start:len(b.body):len(b.body)]
	}
	b.prevTime, b.prevID = at, id
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
	var (
		rs  []Record
		err string
	)
	switch {
	case len(body) == 0:
		return nil, bad("unknown layout")
	case body[0] == blockVersion:
		rs, err = decodeMasks(body[1:])
	case body[0] == 1 || body[0] == 2:
		rs, err = decodeRepeats(fieldsIn(body[0]), body[1:])
	default:
		return nil, bad("unknown layout")
	}
	if err != "" {
		return nil, bad(err)
	}
	if len(rs) == 0 {
		return nil, bad("no records")
	}
	for i := range rs {
		rs[i].Seq += first
	}
	return rs, nil
}

// decodeMasks decodes the records of a layout 3 body, their Seq the
// delta from the block's first; a fault is its description.
func decodeMasks(body []byte) ([]Record, string) {
	d := decoder{b: body}
	var (
		rs       []Record
		prevF    [numFields]string
		prevArgs []byte
		prevTime int64
		prevID   idParts
	)
	for len(d.b) > 0 {
		r := Record{Seq: int64(d.uvarint())}
		micros := prevTime + d.varint()
		latency := d.uvarint()
		mask := d.uvarint()
		if mask&^maskAll != 0 || mask&(maskIDStep|fieldBit(0)) == maskIDStep|fieldBit(0) {
			d.fail("unknown mask")
		}
		if mask&maskIDStep != 0 {
			dms, dlo := d.varint(), d.varint()
			ms := prevID.ms + uint64(dms)
			if d.err == "" && (!prevID.ok || ms >= 1<<48) {
				d.fail("an ID step from no ID")
			}
			prevF[0] = encodeID(ms, prevID.hi, prevID.lo+uint64(dlo))
		}
		fields := fieldsOf(&r)
		for i, f := range fields {
			if mask&fieldBit(i) != 0 {
				prevF[i] = string(d.bytes())
			}
			*f = prevF[i]
		}
		if mask&maskArgs != 0 {
			prevArgs = nil
			if v := d.bytes(); len(v) > 0 {
				prevArgs = slices.Clone(v)
			}
		}
		r.Args = prevArgs
		if err := checkRecord(&d, &r, rs, latency); err != "" {
			return nil, err
		}
		r.Time = time.UnixMicro(micros).UTC()
		r.Latency = time.Duration(latency)
		prevTime, prevID = micros, parseID(r.ID)
		rs = append(rs, r)
	}
	return rs, ""
}

// checkRecord is the fault of r, decoded by d after the records rs, if it
// has one.
func checkRecord(d *decoder, r *Record, rs []Record, latency uint64) string {
	switch {
	case d.err != "":
		return fmt.Sprintf("record %d: %s", len(rs)+1, d.err)
	case len(rs) == 0 && r.Seq != 0:
		return "the first record is not at the block's seq"
	case r.Seq < 0 || r.Seq > 1<<62 || (len(rs) > 0 && r.Seq <= rs[len(rs)-1].Seq):
		return fmt.Sprintf("record %d: seqs out of order", len(rs)+1)
	case latency > 1<<63-1:
		return fmt.Sprintf("record %d: latency out of range", len(rs)+1)
	case len(rs) >= maxBlockRecords:
		return "more records than a block holds"
	}
	return ""
}

// decodeRepeats decodes the records of a layout 1 or 2 body, which has nf
// fields: a record is its seq delta (uvarint), time (varint, Unix
// microseconds) and latency (uvarint), then each field and Args as a
// uvarint n: 0 when the value is the previous record's, else n-1 bytes of
// value.
func decodeRepeats(nf int, body []byte) ([]Record, string) {
	d := decoder{b: body}
	var (
		rs       []Record
		prevF    [numFields]string
		prevArgs []byte
	)
	for len(d.b) > 0 {
		r := Record{Seq: int64(d.uvarint())}
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
		if err := checkRecord(&d, &r, rs, latency); err != "" {
			return nil, err
		}
		r.Time = time.UnixMicro(micros).UTC()
		r.Latency = time.Duration(latency)
		rs = append(rs, r)
	}
	return rs, ""
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

// bytes reads a value: a uvarint length and that many bytes.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != "" {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("field runs past the end")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// value reads a field of layouts 1 and 2: its bytes, or same when it
// repeats the previous record's.
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
