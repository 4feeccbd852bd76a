package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
)

// When the store fails a chunk, the answer says exactly what landed: the chunks before it
// (accepted, with their merges), and stopped_at is the failed chunk's first item, since none
// of that chunk landed. The store's error is named once.
func TestPostTargetsStoreFailureReportsWhatLanded(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	calls := 0
	w := writerFunc(func(ws []store.Write) error {
		if calls++; calls == 2 {
			return fmt.Errorf("store: commit %d writes: %w", len(ws), errors.New("disk full"))
		}
		return e.Store.WriteSchedules(ws)
	})
	mux := http.NewServeMux()
	(&Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: w, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// 2,500 items: item 1 repeats item 0's key (merged into the first chunk), item 1500 repeats
	// item 1499's (merged into the second). The first chunk is items 0..1000 (1,000 keys), the
	// second starts at item 1001 and fails.
	var b strings.Builder
	b.WriteString("[")
	for i := range 2500 {
		n := i
		switch i {
		case 1:
			n = 0
		case 1500:
			n = 1499
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"url": "https://shop.test/p/%d"}`, n)
	}
	b.WriteString("]")
	code, out := postTargets(t, srv, b.String())
	if code != http.StatusServiceUnavailable || out.Accepted != targetsChunk+1 || out.Merged != 1 || out.Rejected != 0 ||
		out.StoppedAt == nil || *out.StoppedAt != targetsChunk+1 {
		t.Fatalf("%d %+v (stopped_at %v): want 503, accepted %d, merged 1, stopped_at %d", code, out, deref(out.StoppedAt), targetsChunk+1, targetsChunk+1)
	}
	if strings.Contains(out.Error, "store: store:") || !strings.Contains(out.Error, "disk full") {
		t.Fatalf("error %q", out.Error)
	}
	if n := len(e.AllRows()); n != targetsChunk {
		t.Fatalf("%d rows, want %d", n, targetsChunk)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
