package store

import (
	"encoding/binary"
	"fmt"
)

// Header is one response header kept with a page.
type Header struct {
	Name  string
	Value string
}

// Page is a rendered page as served: the value of p/+cacheKey.
type Page struct {
	Status       uint16
	Headers      []Header // the few that matter (content-type, …), in the order given
	Body         []byte
	RenderedAtMs int64
	// PlainLen is the body's length once decoded, recorded when the body is stored compressed
	// (1..MaxPageBody), so that a client that does not accept the encoding gets a
	// Content-Length without the body being decompressed first; 0 when not recorded (a page
	// stored uncompressed, or by a version before page v2).
	PlainLen int64
}

// Limits on a Page. A body above MaxPageBody is refused (ErrInvalidPage): it would not fit
// the value log's batch accounting, and no page worth serving is that large.
const (
	MaxPageHeaders  = 32
	MaxHeaderLen    = 8 << 10 // a name or a value
	MaxPageBody     = 32 << 20
	pageFixedHeader = 1 + 2 + 8 + 1
)

// Validate checks the page against the limits.
func (p *Page) Validate() error {
	if len(p.Headers) > MaxPageHeaders {
		return fmt.Errorf("%w: %d headers, limit %d", ErrInvalidPage, len(p.Headers), MaxPageHeaders)
	}
	for _, h := range p.Headers {
		if len(h.Name) == 0 || len(h.Name) > MaxHeaderLen || len(h.Value) > MaxHeaderLen {
			return fmt.Errorf("%w: header %.64q: empty name or longer than %d bytes", ErrInvalidPage, h.Name, MaxHeaderLen)
		}
	}
	if len(p.Body) > MaxPageBody {
		return fmt.Errorf("%w: body of %d bytes, limit %d", ErrInvalidPage, len(p.Body), MaxPageBody)
	}
	if p.PlainLen < 0 || p.PlainLen > MaxPageBody {
		return fmt.Errorf("%w: plain length %d, limit %d", ErrInvalidPage, p.PlainLen, MaxPageBody)
	}
	return nil
}

// Page format, version 1 (tag 0x41). Integers big-endian; lengths are uvarints.
//
//	0     1          3                   11         12
//	+-----+----------+-------------------+----------+-----------------------+------------------+
//	| tag | status   | renderedAtMs i64  | nHeaders | headers …             | body             |
//	+-----+----------+-------------------+----------+-----------------------+------------------+
//	                                                  each header:            uvarint length,
//	                                                  uvarint len, name,      then the bytes
//	                                                  uvarint len, value
//
//	tag       0x41
//	nHeaders  ≤ MaxPageHeaders; names 1..MaxHeaderLen bytes, values ≤ MaxHeaderLen
//	body      ≤ MaxPageBody; no trailing bytes after it
//
// Version 2 (tag 0x42) is version 1 with plainLen, a u32 1..MaxPageBody, between the headers
// and the body. A page whose PlainLen is 0 is always written as version 1, so every page has
// one encoding and pages written before version 2 decode unchanged (PlainLen 0).

// AppendBinary appends the page's encoding to b: version 2 when PlainLen is recorded, else
// version 1. It implements encoding.BinaryAppender.
func (p Page) AppendBinary(b []byte) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return b, err
	}
	tag := byte(tagPageV1)
	if p.PlainLen > 0 {
		tag = tagPageV2
	}
	b = append(b, tag)
	b = binary.BigEndian.AppendUint16(b, p.Status)
	b = binary.BigEndian.AppendUint64(b, uint64(p.RenderedAtMs))
	b = append(b, byte(len(p.Headers)))
	for _, h := range p.Headers {
		b = appendString(b, h.Name)
		b = appendString(b, h.Value)
	}
	if tag == tagPageV2 {
		b = binary.BigEndian.AppendUint32(b, uint32(p.PlainLen))
	}
	return appendBytes(b, p.Body), nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (p Page) MarshalBinary() ([]byte, error) {
	n := pageFixedHeader + 4 + binary.MaxVarintLen64 + len(p.Body)
	for _, h := range p.Headers {
		n += 2*binary.MaxVarintLen16 + len(h.Name) + len(h.Value)
	}
	return p.AppendBinary(make([]byte, 0, n))
}

// UnmarshalBinary decodes b into p. Any input that is not a valid encoding returns an error
// wrapping ErrCorruption and leaves p unchanged. The decoded body is a copy: p does not retain
// b (Badger's value buffers are reused after a transaction ends).
func (p *Page) UnmarshalBinary(b []byte) error {
	return p.unmarshal(b, true)
}

// UnmarshalShared decodes b as UnmarshalBinary does, except that the page's Body is b's own
// bytes, not a copy: for a caller that holds b unchanged for as long as it reads the page, and
// never modifies the body (a page served as stored).
func (p *Page) UnmarshalShared(b []byte) error {
	return p.unmarshal(b, false)
}

func (p *Page) unmarshal(b []byte, copyBody bool) error {
	d := decoder{what: "page", b: b}
	version := d.u8()
	if d.err == nil && version != tagPageV1 && version != tagPageV2 {
		d.fail("unknown tag 0x%02x (want 0x%02x or 0x%02x)", version, tagPageV1, tagPageV2)
	}
	var q Page
	q.Status = d.u16()
	q.RenderedAtMs = d.i64()
	n := int(d.u8())
	if d.err == nil && n > MaxPageHeaders {
		d.fail("%d headers, limit %d", n, MaxPageHeaders)
	}
	if d.err == nil && n > 0 {
		q.Headers = make([]Header, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			h := Header{Name: d.str("header name", MaxHeaderLen), Value: d.str("header value", MaxHeaderLen)}
			if d.err == nil && h.Name == "" {
				d.fail("empty header name")
			}
			q.Headers = append(q.Headers, h)
		}
	}
	if version == tagPageV2 {
		if q.PlainLen = int64(d.u32()); d.err == nil && (q.PlainLen == 0 || q.PlainLen > MaxPageBody) {
			d.fail("plain length %d, want 1..%d", q.PlainLen, MaxPageBody)
		}
	}
	if body := d.bytes("body", MaxPageBody); d.err == nil {
		q.Body = body
		if copyBody {
			q.Body = append([]byte(nil), body...)
		}
	}
	if err := d.done(); err != nil {
		return err
	}
	*p = q
	return nil
}
