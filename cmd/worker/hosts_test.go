package main

import (
	"context"
	"testing"
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// Worker 0 feeds the results it receives to the host table: a 429 with Retry-After sent over
// its control socket, as a render worker sends it, pauses the host in the shared segment every
// render worker reads, and is counted as a host refusal, not applied.
func TestWorker0ResultsPauseTheirHost(t *testing.T) {
	e := worker0Env(t)
	w := newNode(e)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := []byte("desktop|https://slow.test/p/1")
	lease, st := e.seg.Leases().Acquire(shm.KeyHash(key), time.Now().UnixMilli(), 600_000, 1)
	if st != shm.Acquired {
		t.Fatal(st)
	}
	before := time.Now().UnixMilli()
	stats, err := wire.NewClient(e.socketPath).SendResults(ctx, []wire.Result{{Key: key, Outcome: "server_error", Status: 429,
		Headers: map[string]string{"retry-after": "30"}, Lease: intake.WireLease(lease)}})
	if err != nil || stats.HostRefused != 1 || stats.Applied != 0 {
		t.Fatalf("%+v %v, want one host refusal", stats, err)
	}
	hs, ok := e.seg.Hosts().Load(shm.HostHash([]byte("slow.test")))
	if !ok || hs.PausedUntilMs < before+30_000 || hs.PausedUntilMs > time.Now().UnixMilli()+30_000 || hs.Cause != shm.HostCauseRetryAfter {
		t.Fatalf("host after the 429: %+v %v, want paused for 30 s", hs, ok)
	}
}
