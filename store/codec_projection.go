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
	// absent cadence resolves without reading t/. The funnel maintains it: it is taken from
	// the Target a write carries, else carried over from the previous row, else 0.
	StoredIntervalMs int64
	// RankIntervalMs is what the sweep divides a due row's lateness by, when the write that
	// filed the due time decided one: under queue.policy freshness, how long the page's value
	// of a render takes to grow by the threshold past its due time, so that pages worth more
	// rank first among the rows due. 0 means none: the row ranks by its cadence, as under
	// ready. It belongs to the due time it was filed with: a write that files its own due time
	// files its own rank interval (0 unless it decides one), and the funnel never carries it
	// over from the row it replaces.
	RankIntervalMs int64
	Lanes
}

// Projection format, version 1 (tag 0x11), 18 bytes, all integers big-endian:
//
//	0     1       2                         10                        18
//	+-----+-------+-------------------------+-------------------------+
//	| tag | flags | effectiveIntervalMs i64 | storedIntervalMs i64    |
//	+-----+-------+-------------------------+-------------------------+
//
//	tag    0x11
//	flags  bit 0 submitted, bit 1 urgent, bit 2 neverRendered, bit 3 failing;
//	       bits 4-7 are zero (a set one is corruption: a later writer's flag this reader
//	       cannot honour)
//	effectiveIntervalMs, storedIntervalMs  ≥ 0
//
// ProjectionLen is that length; an engine sizes its buffers with it.
const ProjectionLen = 18

// projectionBodyLen is the projection without its tag: flags and the two intervals. The
// schedule row embeds exactly these bytes.
const projectionBodyLen = ProjectionLen - 1

const (
	flagSubmitted     = 1 << 0
	flagUrgent        = 1 << 1
	flagNeverRendered = 1 << 2
	flagFailing       = 1 << 3
	flagsKnown        = flagSubmitted | flagUrgent | flagNeverRendered | flagFailing
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
	return f
}

func (p Projection) validate() error {
	if p.EffectiveIntervalMs < 0 || p.StoredIntervalMs < 0 {
		return ErrNegativeInterval
	}
	return nil
}

func (p Projection) appendBody(dst []byte) []byte {
	dst = append(dst, p.flags())
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.EffectiveIntervalMs))
	return binary.BigEndian.AppendUint64(dst, uint64(p.StoredIntervalMs))
}

func (p *Projection) decodeBody(d *decoder) {
	f := d.u8()
	if d.err == nil && f&^flagsKnown != 0 {
		d.fail("unknown flags 0x%02x", f)
	}
	eff := d.nonNeg("effectiveIntervalMs")
	stored := d.nonNeg("storedIntervalMs")
	if d.err != nil {
		return
	}
	*p = projectionOf(f, eff, stored)
}

// projectionOf is the projection of a flags byte the caller has checked and two intervals.
func projectionOf(f byte, eff, stored int64) Projection {
	return Projection{
		Submitted:           f&flagSubmitted != 0,
		EffectiveIntervalMs: eff,
		StoredIntervalMs:    stored,
		Lanes: Lanes{
			Urgent:        f&flagUrgent != 0,
			NeverRendered: f&flagNeverRendered != 0,
			Failing:       f&flagFailing != 0,
		},
	}
}

// AppendBinary appends the version-1 encoding to b. It implements encoding.BinaryAppender.
func (p Projection) AppendBinary(b []byte) ([]byte, error) {
	if err := p.validate(); err != nil {
		return b, err
	}
	return p.appendBody(append(b, tagProjectionV1)), nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (p Projection) MarshalBinary() ([]byte, error) {
	return p.AppendBinary(make([]byte, 0, ProjectionLen))
}

// UnmarshalBinary decodes b into p. Any input that is not a valid encoding returns an error
// wrapping ErrCorruption and leaves p unchanged. p does not retain b.
//
// The sweep decodes one projection per due row, so this is written as fixed-offset reads
// with the checks folded into one branch; the general decoder reports what was wrong.
func (p *Projection) UnmarshalBinary(b []byte) error {
	if len(b) == ProjectionLen && b[0] == tagProjectionV1 && b[1]&^flagsKnown == 0 && b[2]&0x80 == 0 && b[10]&0x80 == 0 {
		f := b[1]
		*p = Projection{
			Submitted:           f&flagSubmitted != 0,
			EffectiveIntervalMs: int64(binary.BigEndian.Uint64(b[2:10])),
			StoredIntervalMs:    int64(binary.BigEndian.Uint64(b[10:18])),
			Lanes: Lanes{
				Urgent:        f&flagUrgent != 0,
				NeverRendered: f&flagNeverRendered != 0,
				Failing:       f&flagFailing != 0,
			},
		}
		return nil
	}
	if len(b) != ProjectionLen {
		return corruptionf("projection: length %d, want %d", len(b), ProjectionLen)
	}
	d := decoder{what: "projection", b: b}
	d.tag(tagProjectionV1)
	var q Projection
	q.decodeBody(&d)
	if err := d.done(); err != nil {
		return err
	}
	return corruptionf("projection: %x", b) // unreachable: the fast path accepts every valid value
}

// Flags returns the projection's flags byte as the codec draws it (submitted, urgent,
// neverRendered, failing in bits 0-3): a backend that keeps the projection in columns stores
// it as this number.
func (p Projection) Flags() byte { return p.flags() }

// ProjectionOf rebuilds a projection from its flags byte and intervals, refusing what the
// codec refuses (unknown flags, negative intervals) with an error wrapping ErrCorruption.
func ProjectionOf(flags byte, effectiveIntervalMs, storedIntervalMs int64) (Projection, error) {
	if flags&^flagsKnown != 0 {
		return Projection{}, fmt.Errorf("%w: unknown projection flags 0x%02x", ErrCorruption, flags)
	}
	if effectiveIntervalMs < 0 || storedIntervalMs < 0 {
		return Projection{}, fmt.Errorf("%w: negative interval", ErrCorruption)
	}
	return projectionOf(flags, effectiveIntervalMs, storedIntervalMs), nil
}
