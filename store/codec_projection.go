package store

import (
	"encoding/binary"
	"fmt"
)

// Lanes are the lane inputs a schedule row carries. Lanes themselves are derived at score time
// (policy.LaneOf); the store only records the facts they are derived from.
type Lanes struct {
	Urgent        bool // an operator rush is pending (POST /v1/prioritize mode=rush)
	NeverRendered bool // no render of this target has ever succeeded
	Failing       bool // the last attempt failed and the failure is not yet cleared
}

// Projection is what the sweep needs to score a due row without reading anything else: the
// value of a due-index entry, also embedded in the schedule row.
type Projection struct {
	// Submitted is true for rows the site owner submitted (sitemap or API), false for
	// crawler-discovered ones.
	Submitted bool
	// EffectiveIntervalMs is the cadence the write path decided, in ms. 0 means absent: the
	// sweep resolves it from configuration (route > StoredIntervalMs > default).
	EffectiveIntervalMs int64
	// StoredIntervalMs mirrors the target's stored interval (Target.StoredIntervalMs) so an
	// absent cadence resolves without reading t/. The funnel maintains it (Mirror): it is
	// taken from the Target a write carries, else carried over from the previous row, else 0.
	StoredIntervalMs int64
	// RankIntervalMs is what the sweep divides a due row's lateness by, when the write that
	// filed the due time decided one: under queue.policy freshness, how long the page's value
	// of a render takes to grow by the threshold past its due time, so that pages worth more
	// rank first among the rows due. 0 means none: the row ranks by its cadence, as under
	// ready. It belongs to the due time it was filed with: a write that files its own due time
	// files its own rank interval (0 unless it decides one), and the funnel never carries it
	// over from the row it replaces.
	RankIntervalMs int64
	// Checkable mirrors whether the target's origin sent a validator (Target.HasValidators),
	// so that the sweep can tell the render worker that takes the row whether a conditional
	// check is worth asking worker 0 for, without a question per render. The funnel maintains
	// it with StoredIntervalMs (Mirror). It is a hint, never a permission: worker 0 still
	// decides from the target whether the page may be checked instead of rendered.
	Checkable bool
	Lanes
}

// Mirror is what a schedule row mirrors of its target: the funnel takes it from the Target a
// write carries (MirrorOf), else carries it over from the row the write replaces
// (Projection.Mirror), else leaves it zero. One type for every mirrored field, so that an
// engine carrying one over carries them all.
type Mirror struct {
	StoredIntervalMs int64
	Checkable        bool
}

// MirrorOf is what a row mirrors of t.
func MirrorOf(t *Target) Mirror {
	return Mirror{StoredIntervalMs: t.StoredIntervalMs, Checkable: t.HasValidators()}
}

// Mirror is what p mirrors of its target.
func (p *Projection) Mirror() Mirror {
	return Mirror{StoredIntervalMs: p.StoredIntervalMs, Checkable: p.Checkable}
}

// SetMirror sets what p mirrors of its target to m.
func (p *Projection) SetMirror(m Mirror) {
	p.StoredIntervalMs, p.Checkable = m.StoredIntervalMs, m.Checkable
}

// Projection format, version 1 (tag 0x11), 18 bytes, all integers big-endian; the encoding of
// every projection whose RankIntervalMs is 0:
//
//	0     1       2                         10                        18
//	+-----+-------+-------------------------+-------------------------+
//	| tag | flags | effectiveIntervalMs i64 | storedIntervalMs i64    |
//	+-----+-------+-------------------------+-------------------------+
//
//	tag    0x11
//	flags  bit 0 submitted, bit 1 urgent, bit 2 neverRendered, bit 3 failing, bit 4
//	       checkable; bits 5-7 are zero (a set one is corruption: a later writer's flag
//	       this reader cannot honour)
//	effectiveIntervalMs, storedIntervalMs  ≥ 0
//
// Projection format, version 2 (tag 0x12), 26 bytes, all integers big-endian; the encoding of
// every projection whose RankIntervalMs is above 0:
//
//	0     1       2                         10                        18                      26
//	+-----+-------+-------------------------+-------------------------+-----------------------+
//	| tag | flags | effectiveIntervalMs i64 | storedIntervalMs i64    | rankIntervalMs i64    |
//	+-----+-------+-------------------------+-------------------------+-----------------------+
//
//	tag    0x12
//	bytes 1-17 as in version 1
//	rankIntervalMs  > 0 (a version-2 value holding 0 is corruption: rank 0 is written as
//	       version 1, so every projection has one encoding)
//
// The encoder writes version 1 whenever it can, so a store whose writes never decide a rank
// interval (queue.policy ready) holds byte for byte what it held before version 2 existed.
//
// ProjectionLen is the longest encoding (version 2): an engine sizes its buffers with it.
// ProjectionV1Len is the version-1 length.
const (
	ProjectionV1Len = 18
	ProjectionLen   = ProjectionV1Len + 8
)

// projectionBodyLen is the version-1 projection without its tag: flags and the two intervals.
// A schedule row embeds these bytes, then the rank interval when it has one.
const projectionBodyLen = ProjectionV1Len - 1

const (
	flagSubmitted     = 1 << 0
	flagUrgent        = 1 << 1
	flagNeverRendered = 1 << 2
	flagFailing       = 1 << 3
	flagCheckable     = 1 << 4
	flagsKnown        = flagSubmitted | flagUrgent | flagNeverRendered | flagFailing | flagCheckable
)

func (p Projection) flags() byte {
	var f byte
	if p.Submitted {
		f |= flagSubmitted
	}
	if p.Urgent {
		f |= flagUrgent
	}
	if p.NeverRendered {
		f |= flagNeverRendered
	}
	if p.Failing {
		f |= flagFailing
	}
	if p.Checkable {
		f |= flagCheckable
	}
	return f
}

func (p Projection) validate() error {
	if p.EffectiveIntervalMs < 0 || p.StoredIntervalMs < 0 || p.RankIntervalMs < 0 {
		return ErrNegativeInterval
	}
	return nil
}

// ranked reports whether p needs the version-2 encodings (of the projection and of the row).
func (p Projection) ranked() bool { return p.RankIntervalMs != 0 }

// appendBody appends the flags and the two intervals, then the rank interval when p is ranked:
// the projection's bytes after its tag, of either version.
func (p Projection) appendBody(dst []byte) []byte {
	dst = append(dst, p.flags())
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.EffectiveIntervalMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.StoredIntervalMs))
	if p.ranked() {
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.RankIntervalMs))
	}
	return dst
}

// decodeBody reads what appendBody wrote; ranked says whether the tag was a version-2 one.
func (p *Projection) decodeBody(d *decoder, ranked bool) {
	f := d.u8()
	if d.err == nil && f&^flagsKnown != 0 {
		d.fail("unknown flags 0x%02x", f)
	}
	eff := d.nonNeg("effectiveIntervalMs")
	stored := d.nonNeg("storedIntervalMs")
	var rank int64
	if ranked {
		rank = d.nonNeg("rankIntervalMs")
		if d.err == nil && rank == 0 {
			d.fail("version 2 with rankIntervalMs 0 (version 1 encodes that)")
		}
	}
	if d.err != nil {
		return
	}
	*p = projectionOf(f, eff, stored, rank)
}

// projectionOf is the projection of a flags byte the caller has checked and three intervals.
func projectionOf(f byte, eff, stored, rank int64) Projection {
	return Projection{
		Submitted:           f&flagSubmitted != 0,
		EffectiveIntervalMs: eff,
		StoredIntervalMs:    stored,
		RankIntervalMs:      rank,
		Checkable:           f&flagCheckable != 0,
		Lanes: Lanes{
			Urgent:        f&flagUrgent != 0,
			NeverRendered: f&flagNeverRendered != 0,
			Failing:       f&flagFailing != 0,
		},
	}
}

// AppendBinary appends the encoding to b: version 1 when p.RankIntervalMs is 0, else version 2.
// It implements encoding.BinaryAppender.
func (p Projection) AppendBinary(b []byte) ([]byte, error) {
	if err := p.validate(); err != nil {
		return b, err
	}
	tag := byte(tagProjectionV1)
	if p.ranked() {
		tag = tagProjectionV2
	}
	return p.appendBody(append(b, tag)), nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (p Projection) MarshalBinary() ([]byte, error) {
	return p.AppendBinary(make([]byte, 0, ProjectionLen))
}

// UnmarshalBinary decodes b (either version) into p. Any input that is not a valid encoding
// returns an error wrapping ErrCorruption and leaves p unchanged. p does not retain b.
//
// The sweep decodes one projection per due row, so each version is read at fixed offsets with
// its checks folded into one branch; the general decoder only reports what was wrong.
func (p *Projection) UnmarshalBinary(b []byte) error {
	switch len(b) {
	case ProjectionV1Len:
		if b[0] == tagProjectionV1 && b[1]&^flagsKnown == 0 && b[2]&0x80 == 0 && b[10]&0x80 == 0 {
			*p = projectionOf(b[1], int64(binary.BigEndian.Uint64(b[2:10])),
				int64(binary.BigEndian.Uint64(b[10:18])), 0)
			return nil
		}
	case ProjectionLen:
		rank := int64(binary.BigEndian.Uint64(b[18:26]))
		if b[0] == tagProjectionV2 && b[1]&^flagsKnown == 0 && b[2]&0x80 == 0 && b[10]&0x80 == 0 && rank > 0 {
			*p = projectionOf(b[1], int64(binary.BigEndian.Uint64(b[2:10])),
				int64(binary.BigEndian.Uint64(b[10:18])), rank)
			return nil
		}
	default:
		return corruptionf("projection: length %d, want %d or %d", len(b), ProjectionV1Len, ProjectionLen)
	}
	return projectionCorruption(b)
}

// projectionCorruption says what is wrong with b, which has a projection's length but failed
// the fast path.
func projectionCorruption(b []byte) error {
	d := decoder{what: "projection", b: b}
	ranked := len(b) == ProjectionLen
	if ranked {
		d.tag(tagProjectionV2)
	} else {
		d.tag(tagProjectionV1)
	}
	var q Projection
	q.decodeBody(&d, ranked)
	if err := d.done(); err != nil {
		return err
	}
	return corruptionf("projection: %x", b) // unreachable: the fast path accepts every valid value
}

// Flags returns the projection's flags byte as the codec draws it (submitted, urgent,
// neverRendered, failing, checkable in bits 0-4): a backend that keeps the projection in
// columns stores it as this number.
func (p Projection) Flags() byte { return p.flags() }

// ProjectionOf rebuilds a projection from its flags byte and intervals (rankIntervalMs 0:
// none), refusing what the codec refuses (unknown flags, negative intervals) with an error
// wrapping ErrCorruption.
func ProjectionOf(flags byte, effectiveIntervalMs, storedIntervalMs, rankIntervalMs int64) (Projection, error) {
	if flags&^flagsKnown != 0 {
		return Projection{}, fmt.Errorf("%w: unknown projection flags 0x%02x", ErrCorruption, flags)
	}
	if effectiveIntervalMs < 0 || storedIntervalMs < 0 || rankIntervalMs < 0 {
		return Projection{}, fmt.Errorf("%w: negative interval", ErrCorruption)
	}
	return projectionOf(flags, effectiveIntervalMs, storedIntervalMs, rankIntervalMs), nil
}
