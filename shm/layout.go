package shm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/freshq/freshq/shm/hosttable"
)

// The segment is one file, laid out as a header page followed by five sections. Every section
// starts on a page boundary, and every field used atomically is a naturally aligned 8-byte word.
// docs/shm-format.md draws each block byte by byte; the comments here are the short form.
//
//	+-----------------+ 0
//	| header (4 KiB)  |  magic, version, geometry, section table, crc32c
//	+-----------------+ readyOff
//	| ready buffer    |  control line, then slot 0 and slot 1 (header lines + entries)
//	+-----------------+ leaseOff
//	| lease table     |  one control line, then leaseCapacity × 32-byte slots
//	+-----------------+ floorOff
//	| floor cell      |  one 64-byte line
//	+-----------------+ workersOff
//	| worker blocks   |  workerCapacity × (64 + 8·countersPerWorker) bytes
//	+-----------------+ hostsOff
//	| host table      |  one control line, then hostCapacity × 320-byte slots
//	+-----------------+ segmentSize
const (
	// LayoutVersion is bumped whenever any byte of the layout changes meaning. Attaching to a
	// segment of another version fails with a *VersionError (R5). Version 3 added the host table,
	// version 4 its farm words, version 5 the farm's rounds (the round adopted and the one settled)
	// and the farm's shares after the host slots.
	LayoutVersion uint32 = 5

	pageSize   = 4096
	headerSize = pageSize
	lineSize   = 64 // one cache line; hot words that different processes write get their own

	// Header field offsets.
	hMagic          = 0   // [8]byte
	hVersion        = 8   // uint32
	hHeaderSize     = 12  // uint32
	hSegmentSize    = 16  // uint64
	hCreatorPID     = 24  // uint64
	hEpochMs        = 32  // int64
	hReadyCapacity  = 40  // uint32
	hKeyCapacity    = 44  // uint32
	hEntrySize      = 48  // uint32
	hLeaseCapacity  = 52  // uint32
	hLeaseWindow    = 56  // uint32
	hWorkerCapacity = 60  // uint32
	hCounters       = 64  // uint32
	hHostCapacity   = 68  // uint32
	hSections       = 72  // 5 × (offset uint64, size uint64)
	hChecksum       = 152 // uint32 crc32c of bytes [0, hChecksum)
	hEnd            = 156

	// Ready buffer geometry.
	readyControlSize = lineSize
	slotHeaderSize   = 2 * lineSize // line 0: gen, count, publishedAt; line 1: cursor alone
	entryHeaderSize  = 40

	leaseSlotSize    = 32
	floorSize        = lineSize
	workerHeaderSize = lineSize
)

var magic = [8]byte{'F', 'R', 'E', 'S', 'H', 'Q', 'S', 'M'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options sizes a new segment. The zero value of any field means its default.
type Options struct {
	// ReadyCapacity is the number of entries in each of the two ready-buffer slots
	// (queue.ready.capacity). Default 5000.
	ReadyCapacity int
	// KeyCapacity is the longest cache key, in bytes, an entry can hold. Longer keys are
	// dropped from a published set and counted, never truncated. Default 256.
	KeyCapacity int
	// LeaseCapacity is the number of lease slots (queue.max_leases). Default 4096.
	LeaseCapacity int
	// LeaseWindow is how many consecutive slots, from a key's home slot, may hold its lease.
	// A key whose window is entirely live is refused. Default 16, at most LeaseCapacity.
	LeaseWindow int
	// Workers is the number of worker blocks (heartbeats and counters). Default 8.
	Workers int
	// HostCapacity is the number of host-table slots: hosts paused or throttled at once
	// (Hosts). Default 1024.
	HostCapacity int
	// EpochMs is the creator's boot epoch in ms since the Unix epoch. Lease expiries are
	// stored relative to it, so every clock that later reads leases must be at or after it.
	// Zero means the wall clock at Create.
	EpochMs int64
}

// Defaults: the configuration defaults of queue.ready and queue.max_leases (config).
const (
	DefaultReadyCapacity = 5000
	DefaultKeyCapacity   = 256
	DefaultLeaseCapacity = 4096
	DefaultLeaseWindow   = 16
	DefaultWorkers       = 8
	// CountersPerWorker is the number of 64-bit counters in each worker block; see Counter.
	CountersPerWorker = 128

	maxReadyCapacity = 1 << 24 // keeps a slot's cursor index far from its 32-bit limit
	maxKeyCapacity   = 1 << 15 // the entry's key length is a uint16
	maxLeaseCapacity = 1 << 24
	maxWorkers       = 1024
)

// EnsureDefaults fills zero fields with their defaults and returns the result.
func (o Options) EnsureDefaults() Options {
	if o.ReadyCapacity == 0 {
		o.ReadyCapacity = DefaultReadyCapacity
	}
	if o.KeyCapacity == 0 {
		o.KeyCapacity = DefaultKeyCapacity
	}
	if o.LeaseCapacity == 0 {
		o.LeaseCapacity = DefaultLeaseCapacity
	}
	if o.LeaseWindow == 0 {
		o.LeaseWindow = min(DefaultLeaseWindow, o.LeaseCapacity)
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.HostCapacity == 0 {
		o.HostCapacity = DefaultHostCapacity
	}
	return o
}

// Validate reports the first field that cannot describe a segment. Call it on the result of
// EnsureDefaults.
func (o Options) Validate() error {
	check := func(name string, v, lo, hi int) error {
		if v < lo || v > hi {
			return fmt.Errorf("%w: %s = %d, want %d..%d", ErrInvalidOptions, name, v, lo, hi)
		}
		return nil
	}
	for _, c := range []struct {
		name      string
		v, lo, hi int
	}{
		{"ReadyCapacity", o.ReadyCapacity, 1, maxReadyCapacity},
		{"KeyCapacity", o.KeyCapacity, 1, maxKeyCapacity},
		{"LeaseCapacity", o.LeaseCapacity, 1, maxLeaseCapacity},
		{"LeaseWindow", o.LeaseWindow, 1, o.LeaseCapacity},
		{"Workers", o.Workers, 1, maxWorkers},
		{"HostCapacity", o.HostCapacity, 1, hosttable.MaxCapacity},
	} {
		if err := check(c.name, c.v, c.lo, c.hi); err != nil {
			return err
		}
	}
	if o.EpochMs < 0 {
		return fmt.Errorf("%w: EpochMs = %d, want >= 0", ErrInvalidOptions, o.EpochMs)
	}
	return nil
}

// section is one entry of the header's section table.
type section struct{ off, size uint64 }

// Layout is the decoded, validated geometry of a segment. It is computed once by Create from
// Options, and read back by Attach from the header.
type Layout struct {
	SegmentSize   uint64
	CreatorPID    uint64
	EpochMs       int64
	ReadyCapacity uint32
	KeyCapacity   uint32
	EntrySize     uint32
	LeaseCapacity uint32
	LeaseWindow   uint32
	Workers       uint32
	Counters      uint32
	HostCapacity  uint32

	ready, lease, floor, workers, hosts section
}

func alignUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

func entrySizeFor(keyCapacity uint32) uint32 {
	return entryHeaderSize + uint32(alignUp(uint64(keyCapacity), 8))
}

func slotStride(l *Layout) uint64 {
	return slotHeaderSize + alignUp(uint64(l.ReadyCapacity)*uint64(l.EntrySize), lineSize)
}

func workerStride(counters uint32) uint64 { return workerHeaderSize + 8*uint64(counters) }

// newLayout computes the geometry for validated options.
func newLayout(o Options, pid uint64) Layout {
	l := Layout{
		CreatorPID:    pid,
		EpochMs:       o.EpochMs,
		ReadyCapacity: uint32(o.ReadyCapacity),
		KeyCapacity:   uint32(o.KeyCapacity),
		EntrySize:     entrySizeFor(uint32(o.KeyCapacity)),
		LeaseCapacity: uint32(o.LeaseCapacity),
		LeaseWindow:   uint32(o.LeaseWindow),
		Workers:       uint32(o.Workers),
		Counters:      CountersPerWorker,
		HostCapacity:  uint32(o.HostCapacity),
	}
	off := uint64(headerSize)
	next := func(size uint64) section {
		s := section{off: off, size: size}
		off = alignUp(off+size, pageSize)
		return s
	}
	l.ready = next(readyControlSize + 2*slotStride(&l))
	l.lease = next(lineSize + uint64(l.LeaseCapacity)*leaseSlotSize)
	l.floor = next(floorSize)
	l.workers = next(uint64(l.Workers) * workerStride(l.Counters))
	l.hosts = next(hosttable.ControlSize + uint64(l.HostCapacity)*hosttable.SlotSize + hosttable.FarmSharesSize)
	l.SegmentSize = off
	return l
}

// encodeHeader writes l into the first hEnd bytes of hdr, checksum last.
func encodeHeader(hdr []byte, l *Layout) {
	le := binary.LittleEndian
	copy(hdr[hMagic:], magic[:])
	le.PutUint32(hdr[hVersion:], LayoutVersion)
	le.PutUint32(hdr[hHeaderSize:], headerSize)
	le.PutUint64(hdr[hSegmentSize:], l.SegmentSize)
	le.PutUint64(hdr[hCreatorPID:], l.CreatorPID)
	le.PutUint64(hdr[hEpochMs:], uint64(l.EpochMs))
	le.PutUint32(hdr[hReadyCapacity:], l.ReadyCapacity)
	le.PutUint32(hdr[hKeyCapacity:], l.KeyCapacity)
	le.PutUint32(hdr[hEntrySize:], l.EntrySize)
	le.PutUint32(hdr[hLeaseCapacity:], l.LeaseCapacity)
	le.PutUint32(hdr[hLeaseWindow:], l.LeaseWindow)
	le.PutUint32(hdr[hWorkerCapacity:], l.Workers)
	le.PutUint32(hdr[hCounters:], l.Counters)
	le.PutUint32(hdr[hHostCapacity:], l.HostCapacity)
	for i, s := range []section{l.ready, l.lease, l.floor, l.workers, l.hosts} {
		le.PutUint64(hdr[hSections+16*i:], s.off)
		le.PutUint64(hdr[hSections+16*i+8:], s.size)
	}
	le.PutUint32(hdr[hChecksum:], crc32c(hdr[:hChecksum]))
}

// decodeHeader reads and validates the header of a segment whose mapped length is fileSize.
// It checks, in order: length, magic, version, checksum, then every geometric claim the header
// makes, so that no later access computed from the layout can fall outside the mapping.
func decodeHeader(mem []byte) (Layout, error) {
	le := binary.LittleEndian
	if len(mem) < hEnd {
		return Layout{}, fmt.Errorf("%w: %d bytes, the header alone needs %d", ErrTruncated, len(mem), hEnd)
	}
	if [8]byte(mem[hMagic:hMagic+8]) != magic {
		return Layout{}, ErrBadMagic
	}
	if v := le.Uint32(mem[hVersion:]); v != LayoutVersion {
		return Layout{}, &VersionError{Got: v, Want: LayoutVersion}
	}
	if got, want := le.Uint32(mem[hChecksum:]), crc32c(mem[:hChecksum]); got != want {
		return Layout{}, fmt.Errorf("%w: header checksum %08x, computed %08x", ErrCorrupt, got, want)
	}
	l := Layout{
		SegmentSize:   le.Uint64(mem[hSegmentSize:]),
		CreatorPID:    le.Uint64(mem[hCreatorPID:]),
		EpochMs:       int64(le.Uint64(mem[hEpochMs:])),
		ReadyCapacity: le.Uint32(mem[hReadyCapacity:]),
		KeyCapacity:   le.Uint32(mem[hKeyCapacity:]),
		EntrySize:     le.Uint32(mem[hEntrySize:]),
		LeaseCapacity: le.Uint32(mem[hLeaseCapacity:]),
		LeaseWindow:   le.Uint32(mem[hLeaseWindow:]),
		Workers:       le.Uint32(mem[hWorkerCapacity:]),
		Counters:      le.Uint32(mem[hCounters:]),
		HostCapacity:  le.Uint32(mem[hHostCapacity:]),
	}
	secs := make([]section, 5)
	for i := range secs {
		secs[i] = section{off: le.Uint64(mem[hSections+16*i:]), size: le.Uint64(mem[hSections+16*i+8:])}
	}
	l.ready, l.lease, l.floor, l.workers, l.hosts = secs[0], secs[1], secs[2], secs[3], secs[4]
	if err := l.check(uint64(len(mem)), le.Uint32(mem[hHeaderSize:])); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// check verifies that a decoded layout is internally consistent and fits a mapping of
// mappedSize bytes. A checksum can be forged by anyone writing the file, so the geometry is
// re-derived rather than trusted.
func (l *Layout) check(mappedSize uint64, hdrSize uint32) error {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	if hdrSize != headerSize {
		return corrupt("header size %d, want %d", hdrSize, headerSize)
	}
	if l.ReadyCapacity == 0 || l.ReadyCapacity > maxReadyCapacity ||
		l.KeyCapacity == 0 || l.KeyCapacity > maxKeyCapacity ||
		l.LeaseCapacity == 0 || l.LeaseCapacity > maxLeaseCapacity ||
		l.LeaseWindow == 0 || l.LeaseWindow > l.LeaseCapacity ||
		l.Workers == 0 || l.Workers > maxWorkers || l.Counters != CountersPerWorker || l.EpochMs < 0 ||
		l.HostCapacity == 0 || l.HostCapacity > hosttable.MaxCapacity {
		return corrupt("geometry out of range")
	}
	if l.EntrySize != entrySizeFor(l.KeyCapacity) {
		return corrupt("entry size %d for key capacity %d", l.EntrySize, l.KeyCapacity)
	}
	want := newLayout(Options{
		ReadyCapacity: int(l.ReadyCapacity),
		KeyCapacity:   int(l.KeyCapacity),
		LeaseCapacity: int(l.LeaseCapacity),
		LeaseWindow:   int(l.LeaseWindow),
		Workers:       int(l.Workers),
		HostCapacity:  int(l.HostCapacity),
		EpochMs:       l.EpochMs,
	}, l.CreatorPID)
	if want.ready != l.ready || want.lease != l.lease || want.floor != l.floor ||
		want.workers != l.workers || want.hosts != l.hosts || want.SegmentSize != l.SegmentSize {
		return corrupt("section table does not match the declared geometry")
	}
	if mappedSize < l.SegmentSize {
		return fmt.Errorf("%w: file is %d bytes, header declares %d", ErrTruncated, mappedSize, l.SegmentSize)
	}
	return nil
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
