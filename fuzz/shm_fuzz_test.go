package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
)

var fuzzSegOpts = shm.Options{ReadyCapacity: 4, KeyCapacity: 24, LeaseCapacity: 8, LeaseWindow: 4, Workers: 1, HostCapacity: 3, EpochMs: 1}

func validSegment(t testing.TB) []byte {
	size, err := shm.SizeFor(fuzzSegOpts)
	if err != nil {
		t.Fatal(err)
	}
	mem := shm.AlignedMemory(int(size))
	seg, err := shm.Format(mem, fuzzSegOpts)
	if err != nil {
		t.Fatal(err)
	}
	seg.Ready().Publish([]shm.Entry{{Key: []byte("desktop|https://a.test/")}}, 1)
	seg.Hosts().Store(shm.HostState{Host: "a.test", PausedUntilMs: 9, Limit: 1, Cause: shm.HostCauseRetryAfter, Status: 429})
	return mem
}

// FuzzShmAttach feeds arbitrary bytes to the segment validator. It must return a segment or one
// of the four attach errors, never panic; and whatever it accepts must be usable through every
// view without touching memory outside the input.
func FuzzShmAttach(f *testing.F) {
	valid := validSegment(f)
	f.Add(valid)
	for _, n := range []int{0, 7, 8, 12, 139, 140, 155, 156, 4095, 4096, len(valid) / 2, len(valid) - 1} {
		f.Add(valid[:n]) // half-written and truncated segments, as a crash would leave them
	}
	bumped := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(bumped[8:], shm.LayoutVersion+1)
	f.Add(bumped)
	f.Add(bytes.Repeat([]byte{0xff}, len(valid)))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := shm.AlignedMemory(len(data))
		copy(mem, data)
		seg, err := shm.FromBytes(mem)
		if err != nil {
			if !errors.Is(err, shm.ErrTruncated) && !errors.Is(err, shm.ErrBadMagic) &&
				!errors.Is(err, shm.ErrVersion) && !errors.Is(err, shm.ErrCorrupt) {
				t.Fatalf("untyped attach error: %v", err)
			}
			return
		}
		l := seg.Layout()
		if l.SegmentSize > uint64(len(mem)) {
			t.Fatalf("accepted a layout of %d bytes on %d bytes of memory", l.SegmentSize, len(mem))
		}
		// Exercise every view on whatever the bytes say; the views must stay inside the memory.
		var e shm.Entry
		for range 3 {
			seg.Ready().Take(&e)
		}
		seg.Ready().Stats()
		seg.Leases().Stats(5)
		if lease, st := seg.Leases().Acquire(12345, 5, 10, 1); st == shm.Acquired {
			seg.Leases().Release(lease, 6, 0)
		}
		seg.Floor().Lower(3)
		// The host table: a slot's words are whatever the bytes say, its name length included.
		for _, st := range seg.Hosts().Snapshot() {
			if len(st.Host) > shm.MaxHostName {
				t.Fatalf("a host name of %d bytes from a slot of %d", len(st.Host), shm.MaxHostName)
			}
			seg.Hosts().Load(st.Hash)
		}
		seg.Hosts().Store(shm.HostState{Host: "b.test", Limit: 2})
		seg.Hosts().Delete(shm.HostHash([]byte("a.test")))
		if tok, ok := hosts.AdmitToken(seg.Leases(), shm.HostHash([]byte("b.test")), 2, 7, 5, 10, 1); ok {
			seg.Leases().Release(tok, 6, 0)
		}
		hosts.InFlight(seg.Leases(), shm.HostHash([]byte("b.test")), 2, 5)
		for i := range int(l.Workers) {
			w, err := seg.Worker(i)
			if err != nil {
				t.Fatal(err)
			}
			w.Beat(1)
			w.Add(shm.CounterClaimReady, 1)
		}
		seg.Ready().Publish([]shm.Entry{{Key: []byte("k")}}, 1)
	})
}

// FuzzShmEntry publishes one entry with arbitrary fields and takes it back: every field must
// round-trip exactly, and a key over the capacity must be dropped and counted, never truncated.
func FuzzShmEntry(f *testing.F) {
	f.Add(1.5, int64(1000), int64(3600000), true, uint8(2), []byte("desktop|https://example.test/"))
	f.Add(math.Inf(1), int64(-1), int64(0), false, uint8(255), []byte{})
	f.Add(math.NaN(), int64(math.MaxInt64), int64(math.MinInt64), true, uint8(0), bytes.Repeat([]byte("k"), 24))
	f.Add(0.0, int64(0), int64(0), false, uint8(1), bytes.Repeat([]byte("k"), 25))
	f.Fuzz(func(t *testing.T, score float64, due, cadence int64, sitemap bool, lane uint8, key []byte) {
		size, _ := shm.SizeFor(fuzzSegOpts)
		seg, err := shm.Format(shm.AlignedMemory(int(size)), fuzzSegOpts)
		if err != nil {
			t.Fatal(err)
		}
		in := shm.Entry{Score: score, DueAtMs: due, CadenceMs: cadence, Submitted: sitemap, Lane: lane, Key: key}
		res := seg.Ready().Publish([]shm.Entry{in}, 7)
		var out shm.Entry
		st := seg.Ready().Take(&out)
		if len(key) > fuzzSegOpts.KeyCapacity {
			if res.DroppedKeys != 1 || res.Published != 0 || st != shm.Exhausted {
				t.Fatalf("key of %d bytes: result %+v, take %v; want dropped", len(key), res, st)
			}
			return
		}
		if st != shm.Taken {
			t.Fatalf("take: %v", st)
		}
		if math.Float64bits(out.Score) != math.Float64bits(score) || out.DueAtMs != due || out.CadenceMs != cadence ||
			out.Submitted != sitemap || out.Lane != lane || !bytes.Equal(out.Key, key) ||
			out.KeyHash != shm.KeyHash(key) || out.Gen != 1 || out.Index != 0 {
			t.Fatalf("round trip: in %+v, out %+v", in, out)
		}
	})
}
