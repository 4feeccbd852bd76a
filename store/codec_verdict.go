package store

import (
	"encoding/binary"
	"fmt"
)

// Verdict is what a target keeps of its renders' verdicts (package verdict judges, intake
// decides; the store keeps it opaque but well-formed): the last good render's landmarks and
// content digest, the last verdict (its reasons, a bit set the store does not interpret, and
// when), the run of suspect renders that agree on one content (Agree), and whether the stored
// page is a first render judged suspect (Marked). The zero value is "never judged": a target
// written before verdicts existed decodes to it.
type Verdict struct {
	HasGood    bool      // a good render is known: Good and GoodDigest are its
	Good       Landmarks // the last good render's landmarks
	GoodDigest uint64    // its content digest
	Reasons    uint32    // the last verdict's reasons; 0: good
	AtMs       int64     // when the last verdict was given; 0: never
	Agree      Agreement // the suspect renders in a row with one content
	Marked     bool      // the stored page is a first render judged suspect
}

// Landmarks are verdict.Landmarks as the store keeps them.
type Landmarks struct {
	TextLen     uint32
	Title       bool
	H1          bool
	Description bool
	Canonical   bool
}

// Agreement is verdict.Agreement as the store keeps it. Count 0 is no run, and then every
// field is 0.
type Agreement struct {
	Digest  uint64
	Count   uint32
	FirstMs int64
	LastMs  int64
}

// IsZero reports whether nothing is kept: such a target is written as version 1 or 2.
func (v Verdict) IsZero() bool { return v == Verdict{} }

func (v Verdict) validate() error {
	switch {
	case !v.HasGood && (v.Good != Landmarks{} || v.GoodDigest != 0):
		return fmt.Errorf("%w: verdict: good landmarks without a good render", ErrInvalidTarget)
	case v.AtMs < 0 || v.Agree.FirstMs < 0 || v.Agree.LastMs < v.Agree.FirstMs:
		return fmt.Errorf("%w: verdict: a negative time, or an agreement that ends before it starts", ErrInvalidTarget)
	case v.Agree.Count == 0 && v.Agree != Agreement{}:
		return fmt.Errorf("%w: verdict: an agreement of no renders", ErrInvalidTarget)
	}
	return nil
}

// The verdict section of a version-3 target (tag 0x33). Version 3 is version 1's bytes, a
// byte saying whether the freshness section (codec_freshness.go) follows (0 or 1, and 1 only
// with a non-empty one), then this section. Integers big-endian; times ≥ 0.
//
//	0       1             5              13         17        25             33          37            45
//	+-------+-------------+--------------+----------+---------+--------------+-----------+-------------+------------+
//	| flags | goodTextLen | goodDigest   | reasons  | atMs    | agreeDigest  | agreeCount| agreeFirstMs| agreeLastMs|
//	+-------+-------------+--------------+----------+---------+--------------+-----------+-------------+------------+
//	                                                                                                    53
//
//	flags  bit 0 a good render is known, bit 1 marked, bits 2..5 the good render's title, h1,
//	       description, canonical; bits 6..7 are 0
//
// Canonical: without bit 0, bits 2..5, goodTextLen and goodDigest are 0; an agreement of count
// 0 is all zeros; agreeLastMs ≥ agreeFirstMs; a section whose every field is zero is refused
// (that target is version 1's or 2's to write), so every value has one encoding.
const verdictLen = 53

const (
	verdictHasGood = 1 << iota
	verdictMarked
	verdictTitle
	verdictH1
	verdictDescription
	verdictCanonical
	verdictFlags = 1<<iota - 1
)

func (v Verdict) flags() byte {
	var f byte
	for i, on := range []bool{v.HasGood, v.Marked, v.Good.Title, v.Good.H1, v.Good.Description, v.Good.Canonical} {
		if on {
			f |= 1 << i
		}
	}
	return f
}

func (v Verdict) append(b []byte) []byte {
	b = append(b, v.flags())
	b = binary.BigEndian.AppendUint32(b, v.Good.TextLen)
	b = binary.BigEndian.AppendUint64(b, v.GoodDigest)
	b = binary.BigEndian.AppendUint32(b, v.Reasons)
	b = binary.BigEndian.AppendUint64(b, uint64(v.AtMs))
	b = binary.BigEndian.AppendUint64(b, v.Agree.Digest)
	b = binary.BigEndian.AppendUint32(b, v.Agree.Count)
	b = binary.BigEndian.AppendUint64(b, uint64(v.Agree.FirstMs))
	return binary.BigEndian.AppendUint64(b, uint64(v.Agree.LastMs))
}

func (v *Verdict) decode(d *decoder) {
	var q Verdict
	f := d.u8()
	if d.err == nil && f&^verdictFlags != 0 {
		d.fail("verdict: unknown flags 0x%02x", f)
	}
	q.HasGood, q.Marked = f&verdictHasGood != 0, f&verdictMarked != 0
	q.Good = Landmarks{Title: f&verdictTitle != 0, H1: f&verdictH1 != 0,
		Description: f&verdictDescription != 0, Canonical: f&verdictCanonical != 0}
	q.Good.TextLen = d.u32()
	q.GoodDigest = d.u64()
	q.Reasons = d.u32()
	q.AtMs = d.nonNeg("verdict at")
	q.Agree.Digest = d.u64()
	q.Agree.Count = d.u32()
	q.Agree.FirstMs = d.nonNeg("agreement first")
	q.Agree.LastMs = d.nonNeg("agreement last")
	if d.err != nil {
		return
	}
	if err := q.validate(); err != nil {
		d.fail("%v", err)
		return
	}
	if q.IsZero() {
		d.fail("version 3 with an empty verdict section")
		return
	}
	*v = q
}
