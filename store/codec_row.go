package store

import "encoding/binary"

// Row is a decoded schedule row: the value of s/+cacheKey. Its due time is the freshness
// deadline (the package doc, and docs/ARCHITECTURE.md, Glossary): priority is never encoded into it.
type Row struct {
	DueAtMs int64
	Projection
}

// Schedule row format, version 1 (tag 0x21), 26 bytes, all integers big-endian:
//
//	0     1               9       10                        18                        26
//	+-----+---------------+-------+-------------------------+-------------------------+
//	| tag | dueAtMs i64   | flags | effectiveIntervalMs i64 | storedIntervalMs i64    |
//	+-----+---------------+-------+-------------------------+-------------------------+
//	      |               |<-------------- projection body (projection bytes 1-17) -->|
//
//	tag      0x21
//	dueAtMs  ≥ 0; equal to the due time in this row's due-index key
//	the rest is byte for byte the projection without its tag (codec_projection.go)
//
// RowLen is that length; an engine sizes its buffers with it.
const RowLen = 1 + 8 + projectionBodyLen

func (r Row) validate() error {
	if r.DueAtMs < 0 {
		return ErrNegativeDue
	}
	return r.Projection.validate()
}

// AppendBinary appends the version-1 encoding to b. It implements encoding.BinaryAppender.
func (r Row) AppendBinary(b []byte) ([]byte, error) {
	if err := r.validate(); err != nil {
		return b, err
	}
	b = append(b, tagRowV1)
	b = binary.BigEndian.AppendUint64(b, uint64(r.DueAtMs))
	return r.appendBody(b), nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (r Row) MarshalBinary() ([]byte, error) { return r.AppendBinary(make([]byte, 0, RowLen)) }

// UnmarshalBinary decodes b into r. Any input that is not a valid encoding returns an error
// wrapping ErrCorruption and leaves r unchanged. r does not retain b.
func (r *Row) UnmarshalBinary(b []byte) error {
	if len(b) != RowLen {
		return corruptionf("schedule row: length %d, want %d", len(b), RowLen)
	}
	d := decoder{what: "schedule row", b: b}
	d.tag(tagRowV1)
	var q Row
	q.DueAtMs = d.nonNeg("dueAtMs")
	q.decodeBody(&d)
	if err := d.done(); err != nil {
		return err
	}
	*r = q
	return nil
}
