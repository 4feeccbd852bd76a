package store

import (
	"encoding/binary"
	"fmt"
)

// Source says how a target entered the corpus.
type Source uint8

// Sources. The zero value is not a source: a Target must state one.
const (
	SourceSitemap    Source = 1 // submitted in a sitemap
	SourceDiscovered Source = 2 // found by a crawler or a visit
	SourceAPI        Source = 3 // submitted through POST /v1/targets
)

func (s Source) String() string {
	switch s {
	case SourceSitemap:
		return "sitemap"
	case SourceDiscovered:
		return "discovered"
	case SourceAPI:
		return "api"
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// Submitted reports whether the site owner asked for this target (sitemap or API): the
// submitted fact of its schedule row.
func (s Source) Submitted() bool { return s == SourceSitemap || s == SourceAPI }

// Terminal is a target's sealed state (docs/ARCHITECTURE.md, Glossary: sealed). A sealed target keeps a schedule row at its
// recheck time.
type Terminal uint8

// Terminal states.
const (
	TerminalNone          Terminal = 0
	TerminalGone          Terminal = 1 // a confirmed 404/410
	TerminalSuppressed    Terminal = 2 // noindex, rechecked later
	TerminalBeyondHorizon Terminal = 3 // a requirement anchored to the item passed a clock bound
)

func (t Terminal) String() string {
	switch t {
	case TerminalNone:
		return "none"
	case TerminalGone:
		return "gone"
	case TerminalSuppressed:
		return "suppressed"
	case TerminalBeyondHorizon:
		return "beyond_horizon"
	}
	return fmt.Sprintf("terminal(%d)", uint8(t))
}

// Failures is a target's failure record. LastClass is policy's name for the last failure
// class ("timeout", "http_5xx", …); the store keeps it opaque.
type Failures struct {
	Count     uint32
	LastClass string
	FirstMs   int64 // first failure of the current streak
	LastMs    int64 // most recent failure
}

// RenderSummary describes the last completed render attempt.
type RenderSummary struct {
	Status     uint16 // HTTP status of the rendered page; 0 = never rendered
	AtMs       int64  // when the render finished
	DurationMs int64  // how long it took
	Bytes      uint64 // size of the rendered body
}

// Target is the cold metadata of one cacheKey: the value of t/+cacheKey.
type Target struct {
	URL    string
	Device string
	Source Source
	// StoredIntervalMs is the interval stored for this target (0 = none). The funnel mirrors
	// it into the schedule row's projection whenever a write carries the target (Mirror), as
	// it does HasValidators.
	StoredIntervalMs int64
	Route            string
	DemandRung       uint8
	Failures         Failures
	Terminal         Terminal
	// TerminalRecheckMs is when a sealed state is checked again; 0 when Terminal is none.
	TerminalRecheckMs int64
	LastRender        RenderSummary
	// Fresh is the freshness-of-content state (codec_freshness.go); zero until a render or a
	// crawler request is observed.
	Fresh Freshness
	// Verdict is the render verdicts' state (codec_verdict.go); zero until a render is judged.
	Verdict Verdict
}

// HasValidators reports whether the page's origin sent a validator (an ETag or a
// Last-Modified) with the last document it served: the projection mirrors it as Checkable.
func (t *Target) HasValidators() bool {
	return t.Fresh.ETag != "" || t.Fresh.LastModified != ""
}

// Limits on a Target's strings.
const (
	MaxURLLen   = 16 << 10
	maxShortLen = 1 << 10 // device, route, failure class
)

// Validate checks the target's enumerations and sizes.
func (t *Target) Validate() error {
	switch {
	case t.Source < SourceSitemap || t.Source > SourceAPI:
		return fmt.Errorf("%w: source %d", ErrInvalidTarget, t.Source)
	case t.Terminal > TerminalBeyondHorizon:
		return fmt.Errorf("%w: terminal state %d", ErrInvalidTarget, t.Terminal)
	case t.StoredIntervalMs < 0:
		return fmt.Errorf("%w: stored interval: %w", ErrInvalidTarget, ErrNegativeInterval)
	case len(t.URL) > MaxURLLen:
		return fmt.Errorf("%w: url longer than %d bytes", ErrInvalidTarget, MaxURLLen)
	case len(t.Device) > maxShortLen, len(t.Route) > maxShortLen, len(t.Failures.LastClass) > maxShortLen:
		return fmt.Errorf("%w: device, route or failure class longer than %d bytes", ErrInvalidTarget, maxShortLen)
	}
	if err := t.Fresh.validate(); err != nil {
		return err
	}
	return t.Verdict.validate()
}

// Target format, version 1 (tag 0x31). A fixed part, then four length-prefixed strings.
// Integers are big-endian; i64 fields are two's complement; lengths are uvarints.
//
//	0     1      2        3      4                    12          16                  24
//	+-----+------+--------+------+--------------------+-----------+-------------------+
//	| tag | src  | termnl | rung | storedIntervalMs   | failCount | failFirstMs       |
//	+-----+------+--------+------+--------------------+-----------+-------------------+
//	24                  32                  40          42                  50
//	+-------------------+-------------------+-----------+-------------------+
//	| failLastMs        | terminalRecheckMs | lastStatus| lastAtMs          |
//	+-------------------+-------------------+-----------+-------------------+
//	50                  58                  66
//	+-------------------+-------------------+----------+----------+----------+----------+
//	| lastDurationMs    | lastBytes u64     | url      | device   | route    | failClass|
//	+-------------------+-------------------+----------+----------+----------+----------+
//	                                          each: uvarint length, then the bytes
//
//	src     1 sitemap, 2 discovered, 3 api (anything else is corruption)
//	termnl  0 none, 1 gone, 2 suppressed, 3 beyond_horizon
//	rung    demand ladder rung, opaque to the store
//	storedIntervalMs ≥ 0; string lengths within the Target limits; no trailing bytes
//
// Version 2 (tag 0x32) is version 1's bytes under its own tag, followed by the freshness
// section (codec_freshness.go). A target whose Fresh is zero is always written as version 1,
// so a store keeps decoding for a binary of before the freshness state until a render or a
// request gives a target some, and every value has one encoding.
//
// Version 3 (tag 0x33) is version 1's bytes under its own tag, a byte saying whether the
// freshness section follows (1) or not (0), the freshness section when it does, then the
// verdict section (codec_verdict.go). A target whose Verdict is zero is written as version 1
// or 2, so targets no render was judged for keep decoding for a binary of before the verdicts.
const targetFixedLen = 66

// AppendBinary appends the encoding to b: version 3 when Verdict is not zero, else version 1
// when Fresh is zero, else version 2. It implements encoding.BinaryAppender.
func (t Target) AppendBinary(b []byte) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return b, err
	}
	tag := byte(tagTargetV1)
	switch {
	case !t.Verdict.IsZero():
		tag = tagTargetV3
	case !t.Fresh.IsZero():
		tag = tagTargetV2
	}
	b = append(b, tag, byte(t.Source), byte(t.Terminal), t.DemandRung)
	b = binary.BigEndian.AppendUint64(b, uint64(t.StoredIntervalMs))
	b = binary.BigEndian.AppendUint32(b, t.Failures.Count)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Failures.FirstMs))
	b = binary.BigEndian.AppendUint64(b, uint64(t.Failures.LastMs))
	b = binary.BigEndian.AppendUint64(b, uint64(t.TerminalRecheckMs))
	b = binary.BigEndian.AppendUint16(b, t.LastRender.Status)
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastRender.AtMs))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastRender.DurationMs))
	b = binary.BigEndian.AppendUint64(b, t.LastRender.Bytes)
	b = appendString(b, t.URL)
	b = appendString(b, t.Device)
	b = appendString(b, t.Route)
	b = appendString(b, t.Failures.LastClass)
	switch {
	case tag == tagTargetV2:
		b = t.Fresh.append(b)
	case tag == tagTargetV3 && t.Fresh.IsZero():
		b = append(b, 0)
		b = t.Verdict.append(b)
	case tag == tagTargetV3:
		b = append(b, 1)
		b = t.Fresh.append(b)
		b = t.Verdict.append(b)
	}
	return b, nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (t Target) MarshalBinary() ([]byte, error) {
	return t.AppendBinary(make([]byte, 0, targetFixedLen+len(t.URL)+len(t.Device)+len(t.Route)+16+1+verdictLen))
}

// UnmarshalBinary decodes b into t. Any input that is not a valid encoding returns an error
// wrapping ErrCorruption and leaves t unchanged. t does not retain b.
func (t *Target) UnmarshalBinary(b []byte) error {
	d := decoder{what: "target", b: b}
	version := d.u8()
	if d.err == nil && version != tagTargetV1 && version != tagTargetV2 && version != tagTargetV3 {
		d.fail("unknown tag 0x%02x (want 0x%02x, 0x%02x or 0x%02x)", version, tagTargetV1, tagTargetV2, tagTargetV3)
	}
	var q Target
	q.Source = Source(d.u8())
	q.Terminal = Terminal(d.u8())
	q.DemandRung = d.u8()
	q.StoredIntervalMs = d.nonNeg("storedIntervalMs")
	q.Failures.Count = d.u32()
	q.Failures.FirstMs = d.i64()
	q.Failures.LastMs = d.i64()
	q.TerminalRecheckMs = d.i64()
	q.LastRender.Status = d.u16()
	q.LastRender.AtMs = d.i64()
	q.LastRender.DurationMs = d.i64()
	q.LastRender.Bytes = d.u64()
	q.URL = d.str("url", MaxURLLen)
	q.Device = d.str("device", maxShortLen)
	q.Route = d.str("route", maxShortLen)
	q.Failures.LastClass = d.str("failure class", maxShortLen)
	switch version {
	case tagTargetV2:
		q.Fresh.decode(&d)
	case tagTargetV3:
		switch fresh := d.u8(); {
		case d.err != nil:
		case fresh == 1:
			q.Fresh.decode(&d)
		case fresh != 0:
			d.fail("freshness presence byte %d (want 0 or 1)", fresh)
		}
		q.Verdict.decode(&d)
	}
	if err := d.done(); err != nil {
		return err
	}
	if err := q.Validate(); err != nil {
		return corruptionf("target: %v", err)
	}
	*t = q
	return nil
}
