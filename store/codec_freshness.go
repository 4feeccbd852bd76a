package store

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Freshness is what a target keeps for freshness of content (package freshness decides with
// it; the store keeps it opaque but well-formed): the change estimator's three numbers, the
// decayed crawler request count and its time, the digest of the last render's normalised body
// and when content was last verified, and the origin document's validators with the count of
// conditional checks (304s) since the last full render. The zero value is "nothing observed":
// a target written before these fields existed decodes to it.
type Freshness struct {
	Changed        float64 // renders that found the content changed
	ChangedHours   float64 // Σ intervals of those renders, hours
	UnchangedHours float64 // Σ intervals of the renders (and 304s) that found it unchanged, hours
	Requests       float64 // crawler requests, decayed, as of RequestsAtMs
	RequestsAtMs   int64
	Digest         uint64  // of the last full render's normalised body; 0 = none yet
	DigestAtMs     int64   // when the content was last observed (a render or a 304); 0 = never
	Served         float64 // crawler requests served since that observation (not decayed)
	Conditional    uint32  // 304s answered since the last full render
	ETag           string  // the origin document's validators, as it sent them; "" = none
	LastModified   string
}

// IsZero reports whether nothing is kept: such a target is written as version 1.
func (f Freshness) IsZero() bool { return f == Freshness{} }

// finite reports whether v is a value the encoder writes: finite, and ≥ +0 (not −0).
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && !math.Signbit(v) }

func (f Freshness) validate() error {
	switch {
	case !finite(f.Changed) || !finite(f.ChangedHours) || !finite(f.UnchangedHours) || !finite(f.Requests) || !finite(f.Served):
		return fmt.Errorf("%w: freshness: a count or a sum is negative or not finite", ErrInvalidTarget)
	case f.RequestsAtMs < 0 || f.DigestAtMs < 0:
		return fmt.Errorf("%w: freshness: a negative time", ErrInvalidTarget)
	case len(f.ETag) > maxShortLen || len(f.LastModified) > maxShortLen:
		return fmt.Errorf("%w: freshness: a validator longer than %d bytes", ErrInvalidTarget, maxShortLen)
	}
	return nil
}

// The freshness section of a version-2 target (tag 0x32), after version 1's last string.
// Floats are IEEE 754 binary64, big-endian, finite and ≥ +0; times ≥ 0.
//
//	0          8               16                24          32               40
//	+----------+---------------+-----------------+-----------+----------------+
//	| changed  | changedHours  | unchangedHours  | requests  | requestsAtMs   |
//	+----------+---------------+-----------------+-----------+----------------+
//	40         48              56         64                68
//	+----------+---------------+----------+-----------------+------+--------------+
//	| digest   | digestAtMs    | served   | conditional u32 | etag | lastModified |
//	+----------+---------------+----------+-----------------+------+--------------+
//	                                             each: uvarint length ≤ 1024, bytes
//
// A section whose every field is zero is refused: that target is version 1's to write, so
// every value has one encoding.
const freshnessFixedLen = 68

func (f Freshness) append(b []byte) []byte {
	for _, v := range []float64{f.Changed, f.ChangedHours, f.UnchangedHours, f.Requests} {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(f.RequestsAtMs))
	b = binary.BigEndian.AppendUint64(b, f.Digest)
	b = binary.BigEndian.AppendUint64(b, uint64(f.DigestAtMs))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(f.Served))
	b = binary.BigEndian.AppendUint32(b, f.Conditional)
	b = appendString(b, f.ETag)
	return appendString(b, f.LastModified)
}

func (d *decoder) f64(field string) float64 {
	v := math.Float64frombits(d.u64())
	if d.err == nil && !finite(v) {
		d.fail("%s: %v is not a finite value ≥ +0", field, v)
	}
	return v
}

func (f *Freshness) decode(d *decoder) {
	var q Freshness
	q.Changed = d.f64("changed")
	q.ChangedHours = d.f64("changedHours")
	q.UnchangedHours = d.f64("unchangedHours")
	q.Requests = d.f64("requests")
	q.RequestsAtMs = d.nonNeg("requestsAtMs")
	q.Digest = d.u64()
	q.DigestAtMs = d.nonNeg("digestAtMs")
	q.Served = d.f64("served")
	q.Conditional = d.u32()
	q.ETag = d.str("etag", maxShortLen)
	q.LastModified = d.str("lastModified", maxShortLen)
	if d.err == nil && q.IsZero() {
		d.fail("version 2 with an empty freshness section")
	}
	*f = q
}
