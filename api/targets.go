package api

import (
	"errors"
	"net/http"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// Limits of POST /v1/targets beyond the wire's (wire.MaxTargetsBody, wire.MaxTargetItem).
const (
	// targetsHeld is what one upload holds in memory however long it is (a chunk of parsed
	// items with their keys, one item, the reader's buffer): its weight for the Limiter.
	targetsHeld  = 5 << 20
	targetsChunk = intake.ChunkItems // items per funnel batch
)

// Targets serves /v1/targets.
type Targets struct {
	Targets *intake.Targets // worker 0's one targets service (intake.NewTargets)
	Limit   *Limiter        // heavy requests of worker 0; nil: none
}

// Register adds the endpoints to mux.
func (t *Targets) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/targets", t.Limit.Wrap(targetsHeld, http.HandlerFunc(t.post)))
}

func (t *Targets) intake() *intake.Targets { return t.Targets }

// post upserts targets from a JSON array, NDJSON, or any whitespace-separated JSON objects (so
// one pretty-printed object is one item), handing each decoded item to an intake.Upload, which
// validates, merges and writes them in chunks.
func (t *Targets) post(w http.ResponseWriter, r *http.Request) {
	up := t.intake().NewUpload()
	body := http.MaxBytesReader(w, r.Body, wire.MaxTargetsBody)
	next := 0 // the index of the next item to read
	err := wire.DecodeTargetItems(body, func(i int, item *wire.TargetItem, decodeErr error) error {
		next = i + 1
		if decodeErr != nil {
			up.Reject(i, wire.FieldOf(decodeErr), decodeErr.Error())
			return nil
		}
		return up.Add(i, item)
	})
	if !errors.Is(err, intake.ErrStore) {
		// The items read before a malformed or oversized stretch land: the answer says where
		// the body stopped, and everything before it was handled.
		if ferr := up.Flush(); ferr != nil {
			err = ferr
		}
	}
	resp := &up.Resp
	if err == nil {
		if err = up.Check(); err == nil {
			ok(w, resp)
			return
		}
		resp.Error = err.Error()
		failWith(w, err, resp)
		return
	}
	var bad *wire.BodyError
	switch {
	case errors.As(err, &bad):
		resp.StoppedAt = &bad.Index
	case errors.Is(err, intake.ErrStore):
		failedAt := up.FailedAt()
		resp.StoppedAt = &failedAt
	default:
		resp.StoppedAt = &next
		err = bodyError(err)
	}
	err = withHint(err, "split the upload")
	_, _, resp.Error = status(err)
	failWith(w, err, resp)
}
