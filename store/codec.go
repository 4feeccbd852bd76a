package store

import (
	"encoding/binary"
	"math"
)

// Every value codec starts with one tag byte: the high nibble names the codec, the low nibble
// its version. A decoder accepts only the tags it knows, so a value of one kind read as
// another, or a value written by a later version, is reported as corruption rather than
// misread. New versions get new tags; old tags stay decodable for as long as data written with
// them may exist.
const (
	tagProjectionV1 = 0x11 // codec_projection.go
	tagProjectionV2 = 0x12 // codec_projection.go, with the rank interval
	tagRowV1        = 0x21 // codec_row.go
	tagRowV2        = 0x22 // codec_row.go, with the rank interval
	tagTargetV1     = 0x31 // codec_target.go
	tagTargetV2     = 0x32 // codec_target.go, with the freshness section of codec_freshness.go
	tagTargetV3     = 0x33 // codec_target.go, with the verdict section of codec_verdict.go (freshness optional)
	tagPageV1       = 0x41 // codec_page.go
	tagPageV2       = 0x42 // codec_page.go, with the decoded length of a compressed body
)

// decoder reads a value front to back. Every read checks the remaining length first, so a
// truncated or garbage value ends in an error, never a panic or an over-read. The first error
// sticks; callers check d.err once at the end.
type decoder struct {
	what string // record kind, for error messages
	b    []byte
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corruptionf(d.what+": "+format, args...)
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("short value: need %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// i64 reads a signed 64-bit field (two's complement, big-endian).
func (d *decoder) i64() int64 { return int64(d.u64()) }

// nonNeg reads a signed 64-bit field that the encoder only ever writes as ≥ 0.
func (d *decoder) nonNeg(field string) int64 {
	u := d.u64()
	if u > math.MaxInt64 {
		d.fail("%s out of range", field)
		return 0
	}
	return int64(u)
}

// bytes reads a uvarint length, then that many bytes, refusing lengths above max. The result
// aliases the input.
func (d *decoder) bytes(field string, max int) []byte {
	if d.err != nil {
		return nil
	}
	n, w := binary.Uvarint(d.b)
	if w <= 0 {
		d.fail("%s: bad length", field)
		return nil
	}
	if w != uvarintLen(n) {
		// Only the shortest encoding is valid, so every value has one encoding.
		d.fail("%s: non-minimal length encoding", field)
		return nil
	}
	if n > uint64(max) {
		d.fail("%s: length %d above limit %d", field, n, max)
		return nil
	}
	d.b = d.b[w:]
	return d.take(int(n))
}

func (d *decoder) str(field string, max int) string { return string(d.bytes(field, max)) }

// tag checks the leading tag byte.
func (d *decoder) tag(want byte) {
	if t := d.u8(); d.err == nil && t != want {
		d.fail("unknown tag 0x%02x (want 0x%02x)", t, want)
	}
}

// done reports trailing bytes as corruption and returns the first error.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func uvarintLen(n uint64) int {
	w := 1
	for ; n >= 0x80; n >>= 7 {
		w++
	}
	return w
}

func appendBytes(dst, v []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
}

func appendString(dst []byte, v string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
}
