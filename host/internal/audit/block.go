package audit

import (
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
// about 1 µs a record. A query selects blocks by seq, time and keys, and
// filters their records exactly.

// maxBlockRecords bounds a block, so a query decodes little more than the
// page it reads. The writer's default batch fits in one.
const maxBlockRecords = 512

// blockVersion is the first byte of a block's body: the layout of what
// follows.
const blockVersion = 1

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

// encodeBlock encodes records (normalized, Seq set and increasing).
func encodeBlock(rs []Record) block {
	b := block{first: rs[0].Seq, last: rs[len(rs)-1].Seq, count: len(rs), minTime: rs[0].Time, maxTime: rs[0].Time}
	size := 1
	for _, r := range rs {
		size += 40 + len(r.ID) + len(r.ParentID) + len(r.RequestID) + len(r.Protocol) + len(r.ProtocolVersion) +
			len(r.TokenLabel) + len(r.Role) + len(r.Scope) + len(r.UserID) + len(r.Capability) + len(r.Plugin) +
			len(r.Args) + len(r.Decision) + len(r.Step) + len(r.Reason) + len(r.Outcome) + len(r.ErrorCode) + len(r.ErrorRef)
	}
	body := make([]byte, 1, size)
	body[0] = blockVersion
	for _, r := range rs {
		if r.Time.Before(b.minTime) {
			b.minTime = r.Time
		}
		if r.Time.After(b.maxTime) {
			b.maxTime = r.Time
		}
		body = binary.AppendUvarint(body, uint64(r.Seq-b.first))
		body = binary.AppendVarint(body, r.Time.UnixMicro())
		body = binary.AppendUvarint(body, uint64(r.Latency))
		for _, s := range [...]string{r.ID, r.ParentID, r.RequestID, r.Protocol, r.ProtocolVersion, r.TokenLabel,
			r.Role, r.Scope, r.UserID, r.Capability, r.Plugin, string(r.Decision), r.Step, r.Reason,
			string(r.Outcome), r.ErrorCode, r.ErrorRef} {
			body = binary.AppendUvarint(body, uint64(len(s)))
			body = append(body, s...)
		}
		body = binary.AppendUvarint(body, uint64(len(r.Args)))
		body = append(body, r.Args...)
	}
	b.body = body
	b.keys = blockKeys(rs)
	return b
}

// decodeBlock decodes the body of the block whose first record has seq
// first. A body that does not decode is errCorrupt, never a panic.
func decodeBlock(first int64, body []byte) ([]Record, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w at seq %d: %s", errCorrupt, first, what)
	}
	if len(body) == 0 || body[0] != blockVersion {
		return nil, bad("unknown layout")
	}
	d := decoder{b: body[1:]}
	var rs []Record
	prev := int64(-1)
	for len(d.b) > 0 {
		var r Record
		delta := d.uvarint()
		micros := d.varint()
		latency := d.uvarint()
		fields := [...]*string{&r.ID, &r.ParentID, &r.RequestID, &r.Protocol, &r.ProtocolVersion, &r.TokenLabel,
			&r.Role, &r.Scope, &r.UserID, &r.Capability, &r.Plugin, (*string)(&r.Decision), &r.Step, &r.Reason,
			(*string)(&r.Outcome), &r.ErrorCode, &r.ErrorRef}
		for _, f := range fields {
			*f = string(d.bytes())
		}
		if args := d.bytes(); len(args) > 0 {
			r.Args = slices.Clone(args)
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

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != "" {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = "field runs past the end"
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
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
)

type key struct {
	kind  byte
	value string
}

func recordKeys(r *Record) [6]key {
	return [6]key{{keyToken, r.TokenLabel}, {keyUser, r.UserID}, {keyCapability, r.Capability},
		{keyRequest, r.RequestID}, {keyDecision, string(r.Decision)}, {keyStep, r.Step}}
}

// blockKeys is the set of keys of rs, in first-seen order.
func blockKeys(rs []Record) string {
	seen := make(map[key]struct{}, 2*len(rs)+8)
	var sb strings.Builder
	sb.WriteString(keySep)
	for i := range rs {
		for _, k := range recordKeys(&rs[i]) {
			if k.value == "" {
				continue
			}
			if _, ok := seen[k]; ok {
				continue
			}
			seen[k] = struct{}{}
			sb.WriteByte(k.kind)
			sb.WriteByte(':')
			sb.WriteString(keyValue(k.value))
			sb.WriteString(keySep)
		}
	}
	return sb.String()
}

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
