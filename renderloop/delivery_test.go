package renderloop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/timers"
	"github.com/freshq/freshq/wire"
)

// The result sender keeps the services' contract: Stop without Start neither ends its queue
// nor waits; Stop delivers every result queued before it and returns only then; a second Stop
// is a no-op.
func TestDeliveryIsAService(t *testing.T) {
	e := testEnv(t)
	r := &recordingSender{}
	d := newDelivery(e, r, 8, 1)
	d.Stop()
	d.Stop()
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		d.in <- pending{Result: wire.Result{Key: fmt.Appendf(nil, "k%d", i), Outcome: "ok"}, claimedAt: time.Now()}
	}
	stopped := make(chan struct{})
	go func() { d.Stop(); close(stopped) }()
	timers.Within(t, "the delivery's stop", stopped)
	r.mu.Lock()
	n := 0
	for _, b := range r.batches {
		n += len(b)
	}
	r.mu.Unlock()
	if n != 5 {
		t.Fatalf("Stop returned with %d of 5 queued results delivered", n)
	}
	d.Stop()
}
