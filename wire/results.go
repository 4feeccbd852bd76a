package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/freshq/freshq/outcome"
)

// The binary results batch is how render workers deliver results to worker 0 on the control
// socket (POST /internal/results with Content-Type ResultsContentType). It carries exactly
// what the JSON form of a Result carries, without base64 for keys and bodies and without
// reflection: worker 0 decodes every result any render worker produces, and JSON decoding was
// a tenth of its CPU. Remote renderers keep the JSON form of POST /v1/results (docs/API.md).
//
//	batch:
//	+-------+---------+---------+--------+-----+--------+
//	| magic | version | count   | result | ... | result |
//	+-------+---------+---------+--------+-----+--------+
//	  "FQR"   1 byte    uvarint   count results, nothing after the last
//
//	result (fields in this order):
//	+-----+---------+--------+-------+-------------+---------+------+-----+------------+-------------+----------------+---------+
//	| key | outcome | status | stage | duration_ms | headers | body | err | lease.slot | lease.state | lease.key_hash | signals |
//	+-----+---------+--------+-------+-------------+---------+------+-----+------------+-------------+----------------+---------+
//	  str   str       varint   str     varint        hdrs      str    str   uvarint      8 bytes LE    8 bytes LE       sigs
//
//	str:  uvarint length, then that many bytes
//	hdrs: uvarint count, then count (name str, value str) pairs, names distinct and ascending
//	sigs: one byte, 0 (no signals: a renderer that runs no scripts) or 1, then
//	      exceptions, failed_requests, pending_requests as uvarints (each at most MaxInt32),
//	      cold as one byte (0 or 1), and the evidence: uvarint count (at most MaxSignalEvidence),
//	      then that many str of at most MaxSignalEvidenceLen bytes
//
// Version 2 added the signals; version 1 had none.
//
// varint and uvarint are encoding/binary's. A decoder refuses a version it does not know
// (ErrResultsVersion): the sender retries and, past its bound, drops the batch, whose leases
// lapse and whose rows render again. A new field means a new version.

// ResultsContentType marks a body as a binary results batch.
const ResultsContentType = "application/x-freshq-results"

// ResultsVersion is the version EncodeResults writes and the only one DecodeResults reads: a
// render worker and its worker 0 are always of one build (the supervisor starts them from one
// binary).
const ResultsVersion = 2

// Bounds on a result's signals (render.Signals.Evidence's, which a render worker trims to):
// both decoders refuse more, so that a page throwing in a loop costs a result a few hundred
// bytes.
const (
	MaxSignalEvidence    = 4
	MaxSignalEvidenceLen = 256
)

const resultsMagic = "FQR"

// minResultSize is the smallest encoding of one result: one byte for each of its nine
// length-prefixed or varint fields, the two 8-byte lease words, and the signals' presence byte.
const minResultSize = 9 + 16 + 1

// Errors of DecodeResults.
var (
	// ErrResultsMagic: the body is not a binary results batch.
	ErrResultsMagic = errors.New("wire: not a results batch")
	// ErrResultsVersion: a results batch of a version this build does not read.
	ErrResultsVersion = errors.New("wire: unsupported results batch version")
	// ErrResultsCorrupt: a results batch that is truncated, has trailing bytes, or holds a
	// field out of range.
	ErrResultsCorrupt = errors.New("wire: corrupt results batch")
)

// EncodeResults appends the binary batch of rs to dst.
func EncodeResults(dst []byte, rs []Result) []byte {
	n := len(resultsMagic) + 1 + binary.MaxVarintLen64
	for i := range rs {
		r := &rs[i]
		n += 7*binary.MaxVarintLen64 + 16 + len(r.Key) + len(r.Outcome) + len(r.Stage) + len(r.Body) + len(r.Err)
		n += binary.MaxVarintLen64 + 1
		if sg := r.Signals; sg != nil {
			n += 5*binary.MaxVarintLen64 + 1
			for _, e := range sg.Evidence {
				n += binary.MaxVarintLen64 + len(e)
			}
		}
		for k, v := range r.Headers {
			n += 2*binary.MaxVarintLen64 + len(k) + len(v)
		}
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, resultsMagic...)
	dst = append(dst, ResultsVersion)
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	var names []string
	for i := range rs {
		r := &rs[i]
		dst = appendBytes(dst, r.Key)
		dst = appendString(dst, r.Outcome)
		dst = binary.AppendVarint(dst, int64(r.Status))
		dst = appendString(dst, r.Stage)
		dst = binary.AppendVarint(dst, r.DurationMs)
		names = names[:0]
		for k := range r.Headers {
			names = append(names, k)
		}
		slices.Sort(names)
		dst = binary.AppendUvarint(dst, uint64(len(names)))
		for _, k := range names {
			dst = appendString(dst, k)
			dst = appendString(dst, r.Headers[k])
		}
		dst = appendBytes(dst, r.Body)
		dst = appendString(dst, r.Err)
		dst = binary.AppendUvarint(dst, uint64(r.Lease.Slot))
		dst = binary.LittleEndian.AppendUint64(dst, r.Lease.State)
		dst = binary.LittleEndian.AppendUint64(dst, r.Lease.KeyHash)
		dst = appendSignals(dst, r.Signals)
	}
	return dst
}

func appendSignals(dst []byte, sg *Signals) []byte {
	if sg == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(max(0, sg.Exceptions)))
	dst = binary.AppendUvarint(dst, uint64(max(0, sg.FailedRequests)))
	dst = binary.AppendUvarint(dst, uint64(max(0, sg.PendingRequests)))
	cold := byte(0)
	if sg.Cold {
		cold = 1
	}
	dst = append(dst, cold)
	dst = binary.AppendUvarint(dst, uint64(len(sg.Evidence)))
	for _, e := range sg.Evidence {
		dst = appendString(dst, e)
	}
	return dst
}

// signals reads a result's signals section.
func (d *decoder) signals(i int) *Signals {
	switch present := d.byte(); {
	case d.err != nil || present == 0:
		return nil
	case present != 1:
		d.fail("result %d: signals presence byte %d", i, present)
		return nil
	}
	sg := &Signals{
		Exceptions:      int(d.uvarintMax(math.MaxInt32)),
		FailedRequests:  int(d.uvarintMax(math.MaxInt32)),
		PendingRequests: int(d.uvarintMax(math.MaxInt32)),
	}
	switch cold := d.byte(); cold {
	case 0:
	case 1:
		sg.Cold = true
	default:
		d.fail("result %d: signals cold byte %d", i, cold)
	}
	n := d.uvarintMax(MaxSignalEvidence)
	for range n {
		e := d.bytes()
		if len(e) > MaxSignalEvidenceLen {
			d.fail("result %d: %d bytes of evidence, at most %d", i, len(e), MaxSignalEvidenceLen)
		}
		sg.Evidence = append(sg.Evidence, string(e))
	}
	if d.err != nil {
		return nil
	}
	return sg
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// DecodeResults decodes a binary results batch. The keys and bodies of the results it returns
// are slices of b (no copy): b must not change while they are in use. An empty key, body or
// header map decodes as nil. It refuses, before allocating for them, more than MaxResults
// results and more than MaxResultHeaders headers in one result: those errors are a
// *FieldError naming results or results[i].headers, wrapping ErrResultsCorrupt.
func DecodeResults(b []byte) ([]Result, error) {
	if len(b) < len(resultsMagic)+1 || string(b[:len(resultsMagic)]) != resultsMagic {
		return nil, ErrResultsMagic
	}
	if v := b[len(resultsMagic)]; v != ResultsVersion {
		return nil, fmt.Errorf("%w: %d (this build reads %d)", ErrResultsVersion, v, ResultsVersion)
	}
	d := decoder{b: b, off: len(resultsMagic) + 1}
	count := d.uvarint()
	if d.err == nil && count > uint64(len(b)-d.off)/minResultSize {
		d.fail("%d results in %d bytes", count, len(b)-d.off)
	}
	if d.err == nil && count > MaxResults {
		d.fail("%d results, at most %d a request", count, MaxResults)
		return nil, &FieldError{Field: "results", Err: d.err}
	}
	if d.err != nil {
		return nil, d.err
	}
	rs := make([]Result, count)
	for i := range rs {
		r := &rs[i]
		r.Key = d.bytes()
		r.Outcome = intern(outcomes, d.bytes())
		r.Status = int(d.varint(math.MinInt32, math.MaxInt32))
		r.Stage = intern(stages, d.bytes())
		r.DurationMs = d.varint(math.MinInt64, math.MaxInt64)
		if n := d.uvarint(); n > 0 && d.err == nil {
			if n > MaxResultHeaders {
				d.fail("result %d: %d headers, at most %d", i, n, MaxResultHeaders)
				return nil, &FieldError{Field: fmt.Sprintf("results[%d].headers", i), Err: d.err}
			}
			if n > uint64(len(b)-d.off)/2 {
				d.fail("result %d: %d headers in %d bytes", i, n, len(b)-d.off)
				break
			}
			r.Headers = make(map[string]string, n)
			prev := ""
			for h := range n {
				name, value := string(d.bytes()), string(d.bytes())
				if h > 0 && name <= prev {
					d.fail("result %d: header names not distinct and ascending", i)
				}
				r.Headers[name], prev = value, name
			}
		}
		r.Body = d.bytes()
		r.Err = string(d.bytes())
		r.Lease.Slot = uint32(d.uvarintMax(math.MaxUint32))
		r.Lease.State = d.uint64()
		r.Lease.KeyHash = d.uint64()
		r.Signals = d.signals(i)
		if d.err != nil {
			return nil, fmt.Errorf("%w (result %d of %d)", d.err, i+1, count)
		}
	}
	if d.err == nil && d.off != len(b) {
		d.fail("%d bytes after the last result", len(b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return rs, nil
}

// DecodeResults interns the outcomes' names and the stages' (both package outcome's, the
// leaf render shares them through), so that decoding one does not allocate.
var (
	outcomes = internTable(outcomeNames())
	stages   = internTable(outcome.Stages())
)

func outcomeNames() []string {
	var names []string
	for _, o := range outcome.All() {
		names = append(names, o.String())
	}
	return names
}

func internTable(names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = n
	}
	return m
}

func intern(names map[string]string, b []byte) string {
	if s, ok := names[string(b)]; ok {
		return s
	}
	return string(b)
}

// decoder reads a batch; after the first error every read returns a zero value.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrResultsCorrupt, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) uvarintMax(limit uint64) uint64 {
	v := d.uvarint()
	if v > limit {
		d.fail("%d over %d", v, limit)
		return 0
	}
	return v
}

func (d *decoder) varint(lo, hi int64) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	if v < lo || v > hi {
		d.fail("%d out of range", v)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("%d-byte field in %d bytes", n, len(d.b)-d.off)
		return nil
	}
	if n == 0 {
		return nil
	}
	s := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) uint64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}
