package hosts

import (
	"fmt"
	"testing"

	"github.com/freshq/freshq/shm"
)

// BenchmarkAdmit measures what the cluster's division of a host's limit costs a take: a slot of
// a host admitted and released, on a node alone and on a node of a farm of three (its share
// read from the segment's farm words and computed, for the same host and limit). The
// difference between the two is the shared host state's cost per job on the claim path; the
// farm adds nothing per job elsewhere (the pause board is read once a tick).
func BenchmarkAdmit(b *testing.B) {
	lim := Limits{MaxConcurrency: 4}
	for _, farm := range []struct {
		name string
		f    Membership
	}{
		{"alone", Membership{}},
		{"farm-of-3", Membership{Index: 1, Nodes: 3, PrevIndex: 1, PrevNodes: 3, SinceMs: t0 - 3_600_000,
			GraceMs: 4_500, RoundMs: 18_000}},
	} {
		b.Run(farm.name, func(b *testing.B) {
			seg := memSegment(b)
			setMembership(seg, farm.f)
			keys := make([][]byte, 64)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("desktop|https://shop.example/p/%d", i))
			}
			admitted := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now := t0 + int64(i)
				tok, ok := Admit(seg, &lim, keys[i%len(keys)], now, 60_000, 1)
				if ok {
					admitted++
					seg.Leases().Release(tok, now, 0)
				}
			}
			b.StopTimer()
			if admitted == 0 {
				b.Fatal("no take was admitted: the benchmark measured refusals")
			}
		})
	}
}

// BenchmarkHostTokenRelease measures what politeness adds to a grant: taking a slot of a host
// limited to 4 (render.hosts.max_concurrency's default) and giving it back, with 0 or 3 of its
// slots held by other renders (three held: a take tries 2.5 tokens on average before the free
// one), to set beside a row lease's acquire and release (shm.BenchmarkLeaseAcquireRelease).
func BenchmarkHostTokenRelease(b *testing.B) {
	for _, held := range []int{0, 3} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			seg := tokenSegment(b)
			l := seg.Leases()
			host := shm.HostHash([]byte("shop.example"))
			for range held {
				if _, ok := AdmitToken(l, host, 4, 0, 1000, 600_000, 2); !ok {
					b.Fatal("setup: slot refused")
				}
			}
			b.ResetTimer()
			for i := range b.N {
				tok, ok := AdmitToken(l, host, 4, uint64(i), 1000, 600_000, 1)
				if !ok {
					b.Fatal("admit refused")
				}
				l.Release(tok, 1000, 0)
			}
		})
	}
}
