package store

import "encoding/binary"

// Row is a decoded schedule row: the value of s/+cacheKey. Its due time is the freshness
// deadline (the package doc, and docs/ARCHITECTURE.md, Glossary): priority is never encoded into it.
type Row struct {
	DueAtMs int64
	Projection
}

// Schedule row format, version 1 (tag 0x21), 26 bytes, all integers big-endian; the encoding of
// every row whose RankIntervalMs is 0:
//
//	0     1               9       10                        18                        26
//	+-----+---------------+-------+-------------------------+-------------------------+
//	| tag | dueAtMs i64   | flags | effectiveIntervalMs i64 | storedIntervalMs i64    |
//	+-----+---------------+-------+-------------------------+-------------------------+
//	      |               |<-------------- projection body (projection bytes 1-17) -->|
//
//	tag      0x21
//	dueAtMs  ≥ 0; equal to the due time in this row's due-index key
//	the rest is byte for byte the version-1 projection without its tag (codec_projection.go)
//
// Schedule row format, version 2 (tag 0x22), 34 bytes, all integers big-endian; the encoding of
// every row whose RankIntervalMs is above 0:
//
//	0     1               9       10                        18                        26                      34
//	+-----+---------------+-------+-------------------------+-------------------------+-----------------------+
//	| tag | dueAtMs i64   | flags | effectiveIntervalMs i64 | storedIntervalMs i64    | rankIntervalMs i64    |
//	+-----+---------------+-------+-------------------------+-------------------------+-----------------------+
//	      |               |<----------------------- projection body (projection bytes 1-25) ------------------>|
//
//	tag      0x22
//	dueAtMs  as in version 1
//	the rest is byte for byte the version-2 projection without its tag (rankIntervalMs > 0)
//
// RowLen is the longest encoding (version 2): an engine sizes its buffers with it. RowV1Len is
// the version-1 length.
const (
	RowV1Len = 1 + 8 + projectionBodyLen
	RowLen   = RowV1Len + 8
)

func (r Row) validate() error {
	if r.DueAtMs < 0 {
		return ErrNegativeDue
	}
	return r.Projection.validate()
}

// AppendBinary appends the encoding to b: version 1 when r.RankIntervalMs is 0, else version 2.
// It implements encoding.BinaryAppender.
func (r Row) AppendBinary(b []byte) ([]byte, error) {
	if err := r.validate(); err != nil {
		return b, err
	}
	tag := byte(tagRowV1)
	if r.ranked() {
		tag = tagRowV2
	}
	b = append(b, tag)
	b = binary.BigEndian.AppendUint64(b, uint64(r.DueAtMs))
	return r.appendBody(b), nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (r Row) MarshalBinary() ([]byte, error) { return r.AppendBinary(make([]byte, 0, RowLen)) }

// UnmarshalBinary decodes b (either version) into r. Any input that is not a valid encoding
// returns an error wrapping ErrCorruption and leaves r unchanged. r does not retain b.
func (r *Row) UnmarshalBinary(b []byte) error {
	var ranked bool
	switch len(b) {
	case RowV1Len:
	case RowLen:
		ranked = true
	default:
		return corruptionf("schedule row: length %d, want %d or %d", len(b), RowV1Len, RowLen)
	}
	d := decoder{what: "schedule row", b: b}
	if ranked {
		d.tag(tagRowV2)
	} else {
		d.tag(tagRowV1)
	}
	var q Row
	q.DueAtMs = d.nonNeg("dueAtMs")
	q.decodeBody(&d, ranked)
	if err := d.done(); err != nil {
		return err
	}
	*r = q
	return nil
}
