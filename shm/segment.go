package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"

	"github.com/freshq/freshq/shm/hosttable"
)

// DefaultPath is where the supervisor creates the segment unless configured otherwise. /dev/shm
// is a tmpfs, so the segment never touches a disk.
const DefaultPath = "/dev/shm/freshq.seg"

// Segment is one attached shared-memory segment. Its views (Ready, Leases, Floor, Worker) are
// safe for concurrent use by any number of goroutines and processes. A Segment must not be used
// after Close: its memory is unmapped.
type Segment struct {
	layout Layout
	mem    []byte
	mapped mmap.MMap // nil when the memory belongs to the caller (FromBytes)

	ready  Ready
	leases Leases
	floor  Floor
	fence  Fence
	hosts  *Hosts
}

// Create makes a new segment file at path, mode 0600, sized and initialised for opts, and
// attaches to it. An existing file at path is replaced atomically: the new segment is built in
// a temporary file in the same directory and renamed over path only once its header is
// complete, so a worker attaching concurrently sees either the old segment or the new one,
// never a half-written one. Processes still attached to the old file keep their mapping of it.
func Create(path string, opts Options) (*Segment, error) {
	opts = opts.EnsureDefaults()
	if opts.EpochMs == 0 {
		opts.EpochMs = time.Now().UnixMilli()
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := newLayout(opts, uint64(os.Getpid()))

	f, err := os.CreateTemp(filepath.Dir(path), ".freshq-seg-*")
	if err != nil {
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	if err := unix.Ftruncate(int(f.Fd()), int64(l.SegmentSize)); err != nil {
		return nil, fmt.Errorf("shm: create %s: size %d: %w", path, l.SegmentSize, err)
	}
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: create %s: map: %w", path, err)
	}
	// The file is fresh from ftruncate, so every section is zero: a zero ready buffer is cold,
	// a zero lease table is empty, a zero floor scans from the beginning.
	encodeHeader(m, &l)
	if err := os.Rename(tmp, path); err != nil {
		m.Unmap()
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	f.Close()
	f = nil
	return newSegment(l, m, m), nil
}

// Attach maps the existing segment at path and validates its header (R5). A file that is not a
// segment, is of another layout version, is truncated or has a damaged header yields an error
// wrapping ErrBadMagic, ErrVersion, ErrTruncated or ErrCorrupt; attach never panics on the
// file's contents.
//
// A segment truncated by someone else after Attach returned cannot be detected: touching the
// lost pages raises SIGBUS. Only the supervisor creates the file, and nothing truncates it.
func Attach(path string) (*Segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: attach %s: %w", path, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("shm: attach %s: %w", path, err)
	}
	if st.Size < hEnd {
		return nil, fmt.Errorf("shm: attach %s: %w: %d bytes", path, ErrTruncated, st.Size)
	}
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: attach %s: map: %w", path, err)
	}
	l, err := decodeHeader(m)
	if err != nil {
		m.Unmap()
		return nil, fmt.Errorf("shm: attach %s: %w", path, err)
	}
	return newSegment(l, m, m), nil
}

// Format initialises mem (which must be zeroed, 8-byte aligned and at least SizeFor(opts)
// bytes) as a segment and returns it. It exists so that tests and the interleaving model can
// run the real protocol on ordinary memory; production uses Create.
func Format(mem []byte, opts Options) (*Segment, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := newLayout(opts, uint64(os.Getpid()))
	if uint64(len(mem)) < l.SegmentSize {
		return nil, fmt.Errorf("shm: format: %w: %d bytes, need %d", ErrTruncated, len(mem), l.SegmentSize)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 != 0 {
		return nil, errors.New("shm: format: memory is not 8-byte aligned")
	}
	encodeHeader(mem, &l)
	return newSegment(l, mem, nil), nil
}

// FromBytes validates mem as a segment, exactly as Attach validates a file, and returns a
// Segment over it. mem must be 8-byte aligned.
func FromBytes(mem []byte) (*Segment, error) {
	if len(mem) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 != 0 {
		return nil, errors.New("shm: memory is not 8-byte aligned")
	}
	l, err := decodeHeader(mem)
	if err != nil {
		return nil, err
	}
	return newSegment(l, mem, nil), nil
}

// SizeFor is the number of bytes a segment with opts occupies.
func SizeFor(opts Options) (uint64, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	l := newLayout(opts, 0)
	return l.SegmentSize, nil
}

func newSegment(l Layout, mem []byte, mapped mmap.MMap) *Segment {
	s := &Segment{layout: l, mem: mem, mapped: mapped}
	s.ready.init(s)
	s.leases.init(s)
	s.floor.init(s)
	s.fence.init(s)
	s.hosts = hosttable.New(s.mem[l.hosts.off:l.hosts.off+l.hosts.size], int(l.HostCapacity))
	return s
}

// Layout returns the segment's validated geometry.
func (s *Segment) Layout() Layout { return s.layout }

// Ready is the double-slotted ready buffer.
func (s *Segment) Ready() *Ready { return &s.ready }

// Leases is the lease table.
func (s *Segment) Leases() *Leases { return &s.leases }

// Floor is the claim-floor cell.
func (s *Segment) Floor() *Floor { return &s.floor }

// Fence is the node's grant fence (Fence), in the floor cell's line.
func (s *Segment) Fence() *Fence { return &s.fence }

// Hosts is the host table: the hosts paused or throttled for politeness.
func (s *Segment) Hosts() *Hosts { return s.hosts }

// Close unmaps the segment. It does not remove the file: the supervisor owns its lifetime.
func (s *Segment) Close() error {
	if s.mapped == nil {
		return nil
	}
	err := s.mapped.Unmap()
	s.mapped = nil
	if err != nil {
		return fmt.Errorf("shm: unmap: %w", err)
	}
	return nil
}

// word returns the 8-byte word at byte offset off. Offsets come only from a validated Layout,
// so they are in range and 8-byte aligned.
func (s *Segment) word(off uint64) *uint64 {
	return (*uint64)(unsafe.Pointer(&s.mem[off]))
}
