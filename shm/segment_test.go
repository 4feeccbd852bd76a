package shm

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCreateAttachRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seg")
	opts := Options{ReadyCapacity: 100, KeyCapacity: 64, LeaseCapacity: 128, LeaseWindow: 8, Workers: 3, EpochMs: 42}
	seg, err := Create(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if uint64(fi.Size()) != seg.Layout().SegmentSize {
		t.Errorf("file size %d, layout says %d", fi.Size(), seg.Layout().SegmentSize)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".freshq-seg-*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}

	seg.Ready().Publish(checkedSet(1, 3, 64), 7)
	seg.Floor().Lower(-1) // floor starts at 0; lowering below works and is visible to others
	other, err := Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l := other.Layout()
	if l.ReadyCapacity != 100 || l.KeyCapacity != 64 || l.LeaseCapacity != 128 || l.LeaseWindow != 8 ||
		l.Workers != 3 || l.EpochMs != 42 || l.CreatorPID != uint64(os.Getpid()) {
		t.Errorf("attached layout %+v does not match options %+v", l, opts)
	}
	var e Entry
	if st := other.Ready().Take(&e); st != Taken {
		t.Fatalf("take through second mapping: %v", st)
	}
	if err := verifyEntry(&e); err != nil {
		t.Fatal(err)
	}
	if other.Floor().Load() != -1 {
		t.Errorf("floor through second mapping %d, want -1", other.Floor().Load())
	}
}

func TestCreateReplacesExistingSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	old, err := Create(path, Options{ReadyCapacity: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.Ready().Publish(checkedSet(1, 2, 256), 1)
	seg, err := Create(path, Options{ReadyCapacity: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if st := seg.Ready().Stats(); st.Gen != 0 {
		t.Errorf("new segment starts at generation %d, want cold", st.Gen)
	}
	// The old mapping still works on the old (now unlinked) file.
	var e Entry
	if st := old.Ready().Take(&e); st != Taken {
		t.Errorf("old mapping take: %v", st)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{ReadyCapacity: -1},
		{ReadyCapacity: maxReadyCapacity + 1},
		{KeyCapacity: maxKeyCapacity + 1},
		{LeaseCapacity: 4, LeaseWindow: 5},
		{Workers: maxWorkers + 1},
		{EpochMs: -5},
	} {
		err := o.EnsureDefaults().Validate()
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: got %v, want ErrInvalidOptions", o, err)
		}
		if _, err := Create(filepath.Join(t.TempDir(), "seg"), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Create(%+v): got %v, want ErrInvalidOptions", o, err)
		}
	}
	if err := (Options{}).EnsureDefaults().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

// validImage returns the bytes of a small valid segment.
func validImage(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seg")
	seg, err := Create(path, Options{ReadyCapacity: 4, KeyCapacity: 16, LeaseCapacity: 8, LeaseWindow: 4, Workers: 1, EpochMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	seg.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reseal(b []byte) {
	binary.LittleEndian.PutUint32(b[hChecksum:], crc32c(b[:hChecksum]))
}

func TestAttachRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func([]byte) []byte
		want   error
	}{
		{"empty", func(b []byte) []byte { return b[:0] }, ErrTruncated},
		{"half header", func(b []byte) []byte { return b[:hEnd-1] }, ErrTruncated},
		{"header only", func(b []byte) []byte { return b[:headerSize] }, ErrTruncated},
		{"last byte missing", func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated},
		{"garbage", func(b []byte) []byte {
			for i := range b {
				b[i] = byte(i * 31)
			}
			return b
		}, ErrBadMagic},
		{"other version", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[hVersion:], LayoutVersion+1)
			reseal(b)
			return b
		}, ErrVersion},
		{"flipped bit", func(b []byte) []byte { b[hReadyCapacity] ^= 1; return b }, ErrCorrupt},
		{"forged geometry", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[hReadyCapacity:], 1<<20) // larger than the file
			reseal(b)
			return b
		}, ErrCorrupt},
		{"section overlap", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[hSections+16:], headerSize) // lease table over the ready buffer
			reseal(b)
			return b
		}, ErrCorrupt},
		{"zero workers", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[hWorkerCapacity:], 0)
			reseal(b)
			return b
		}, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := tc.mutate(validImage(t))
			path := filepath.Join(t.TempDir(), "seg")
			if err := os.WriteFile(path, img, 0o600); err != nil {
				t.Fatal(err)
			}
			seg, err := Attach(path)
			if !errors.Is(err, tc.want) {
				if seg != nil {
					seg.Close()
				}
				t.Fatalf("Attach: got %v, want %v", err, tc.want)
			}
			// FromBytes applies the same validation to memory.
			mem := alignedCopy(img)
			if _, err := FromBytes(mem); !errors.Is(err, tc.want) {
				t.Fatalf("FromBytes: got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestVersionErrorNamesBothVersions(t *testing.T) {
	img := validImage(t)
	binary.LittleEndian.PutUint32(img[hVersion:], 9)
	reseal(img)
	_, err := FromBytes(alignedCopy(img))
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Got != 9 || ve.Want != LayoutVersion {
		t.Fatalf("got %v, want *VersionError{9, %d}", err, LayoutVersion)
	}
}

func TestAttachMissingFile(t *testing.T) {
	_, err := Attach(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}

func TestFormatOnMemory(t *testing.T) {
	opts := Options{ReadyCapacity: 8, KeyCapacity: 32, LeaseCapacity: 16, Workers: 2, EpochMs: 5}
	size, err := SizeFor(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Format(alignedCopy(make([]byte, size-1)), opts); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Format on short memory: %v", err)
	}
	mem := alignedCopy(make([]byte, size))
	seg, err := Format(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	seg.Ready().Publish(checkedSet(1, 1, 32), 0)
	again, err := FromBytes(mem)
	if err != nil {
		t.Fatal(err)
	}
	if again.Ready().Stats().Gen != 1 {
		t.Fatal("FromBytes does not see the published generation")
	}
	if _, err := FromBytes(mem[1:]); err == nil {
		t.Fatal("FromBytes accepted unaligned memory")
	}
}

// alignedCopy returns b's bytes in 8-byte aligned memory.
func alignedCopy(b []byte) []byte {
	words := make([]uint64, (len(b)+7)/8)
	mem := unsafeBytes(words)[:len(b)]
	copy(mem, b)
	return mem
}
