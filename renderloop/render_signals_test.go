package renderloop

import (
	"context"
	"strings"
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/wire"
)

// A render worker passes worker 0's cache epoch to its renderer with each render, and copies
// the render's signals into the result it sends worker 0, trimmed to the bounds (at most
// render.MaxEvidence lines of render.MaxEvidenceLen bytes): a renderer's overlong evidence
// never costs the result its delivery.
func TestRenderJobCarriesSignalsAndCacheEpoch(t *testing.T) {
	e := testEnv(t)
	e.Seg.BumpCacheEpoch()
	e.Seg.BumpCacheEpoch()
	var gotEpoch uint64
	long := strings.Repeat("é", 400) // 800 bytes: cut on a rune boundary
	rdr := rendererFunc(func(_ context.Context, req render.Request) render.Result {
		gotEpoch = req.CacheEpoch
		return render.Result{Outcome: outcome.OK, Status: 200, Stage: render.StageBody, Body: []byte("<html></html>"),
			Signals: &render.Signals{Exceptions: 7, FailedRequests: 2, PendingRequests: 1, Cold: true,
				Evidence: []string{long, "b", "c", "d", "e", "f"}}}
	})
	res, ok := renderJob(context.Background(), e, rdr, claim.Job{Key: []byte("desktop|https://shop.test/a")}, nil)
	if !ok {
		t.Fatal("the result was not kept")
	}
	if gotEpoch != 2 {
		t.Errorf("the renderer was given cache epoch %d, want 2", gotEpoch)
	}
	s := res.Signals
	if s == nil || s.Exceptions != 7 || s.FailedRequests != 2 || s.PendingRequests != 1 || !s.Cold {
		t.Fatalf("signals on the wire: %+v", s)
	}
	if len(s.Evidence) != render.MaxEvidence {
		t.Errorf("%d evidence lines, want %d", len(s.Evidence), render.MaxEvidence)
	}
	if l := s.Evidence[0]; len(l) > render.MaxEvidenceLen || !strings.HasPrefix(long, l) || len(l) < render.MaxEvidenceLen-1 {
		t.Errorf("the long line became %d bytes: %q", len(l), l)
	}

	plain := rendererFunc(func(context.Context, render.Request) render.Result {
		return render.Result{Outcome: outcome.OK, Status: 200, Stage: render.StageBody, Body: []byte("<html></html>")}
	})
	if res, _ := renderJob(context.Background(), e, plain, claim.Job{Key: []byte("desktop|https://shop.test/a")}, nil); res.Signals != nil {
		t.Errorf("a renderer without signals got some on the wire: %+v", res.Signals)
	}
}

// A render worker trims a render's evidence to render's bounds and worker 0's decoder refuses
// more than wire's: they must be the same bounds, or every result of a page that throws would
// be refused.
func TestEvidenceBoundsAgreeWithTheWire(t *testing.T) {
	if render.MaxEvidence != wire.MaxSignalEvidence || render.MaxEvidenceLen != wire.MaxSignalEvidenceLen {
		t.Fatalf("render trims evidence to %d lines of %d bytes, wire takes %d of %d",
			render.MaxEvidence, render.MaxEvidenceLen, wire.MaxSignalEvidence, wire.MaxSignalEvidenceLen)
	}
}
