package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
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
	Store  *store.Store
	Writer intake.Writer    // every write of worker 0 goes through sweep.Changes' wrapper
	Locks  *intake.KeyLocks // shared with the Applier
	Policy func() *policy.Policy
	Now    func() int64
	Limit  *Limiter // heavy requests of worker 0; nil: none
}

// Register adds the endpoints to mux.
func (t *Targets) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/targets", t.Limit.Wrap(targetsHeld, http.HandlerFunc(t.post)))
}

// intake is the write side the handlers call, sharing t's store, writer and locks.
func (t *Targets) intake() *intake.Targets {
	return &intake.Targets{Store: t.Store, Writer: t.Writer, Locks: t.Locks, Policy: t.Policy, Now: t.Now}
}

// post upserts targets from a JSON array, NDJSON, or any whitespace-separated JSON objects (so
// one pretty-printed object is one item). Each item is validated on its own (intake.ParseItem):
// a bad one is rejected with the field it got wrong, the good ones land. Items are gathered in
// chunks that intake.Targets.Upsert merges with what is stored and writes; a key repeated
// within a chunk is merged over its earlier item (intake.Item.MergeOver) before the chunk is
// written.
func (t *Targets) post(w http.ResponseWriter, r *http.Request) {
	svc := t.intake()
	devs := intake.Devices(t.Policy().Config())
	body := http.MaxBytesReader(w, r.Body, wire.MaxTargetsBody)
	var resp wire.TargetsResponse
	reject := func(i int, field, msg string) {
		resp.Rejected++
		if len(resp.Errors) < intake.MaxReportErrors {
			resp.Errors = append(resp.Errors, wire.ItemError{Index: i, Field: field, Error: msg})
		}
	}
	chunk := make([]intake.Item, 0, targetsChunk)
	inChunk := make(map[string]int, targetsChunk)
	next := 0        // the index of the next item to read
	chunkMerged := 0 // merges into the chunk being gathered, counted in resp.Merged
	failedAt := -1   // the first item of the chunk the store failed
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		n, err := svc.Upsert(chunk, reject)
		resp.Accepted += n
		if err != nil {
			// Nothing of the chunk landed: neither its first item nor its merges.
			failedAt, resp.Merged = chunk[0].Index, resp.Merged-chunkMerged
		}
		chunk, chunkMerged = chunk[:0], 0
		clear(inChunk)
		return err
	}
	err := wire.DecodeTargetItems(body, func(i int, item *wire.TargetItem, decodeErr error) error {
		next = i + 1
		if decodeErr != nil {
			reject(i, wire.FieldOf(decodeErr), decodeErr.Error())
			return nil
		}
		p, err := intake.ParseItem(item, devs)
		if err != nil {
			_, field, msg := status(err)
			reject(i, field, msg)
			return nil
		}
		p.Index = i
		if j, ok := inChunk[string(p.Key)]; ok {
			chunk[j].MergeOver(&p)
			resp.Merged++
			chunkMerged++
			return nil
		}
		inChunk[string(p.Key)] = len(chunk)
		chunk = append(chunk, p)
		if len(chunk) == targetsChunk {
			return flush()
		}
		return nil
	})
	if !errors.Is(err, intake.ErrStore) {
		// The items read before a malformed or oversized stretch land: the answer says where
		// the body stopped, and everything before it was handled.
		if ferr := flush(); ferr != nil {
			err = ferr
		}
	}
	if err == nil {
		code := http.StatusOK
		if resp.Accepted == 0 && resp.Rejected > 0 {
			code = http.StatusBadRequest
			resp.Error = fmt.Sprintf("no item accepted: all %d were rejected (errors lists the first by index)", resp.Rejected)
		}
		writeJSON(w, code, resp)
		return
	}
	resp.StoppedAt = &next
	var bad *wire.BodyError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &bad):
		resp.StoppedAt = &bad.Index
	case errors.Is(err, intake.ErrStore):
		resp.StoppedAt = &failedAt
	case !errors.As(err, &tooBig):
		err = &readError{err}
	}
	var code int
	code, _, resp.Error = status(err)
	if code == http.StatusRequestEntityTooLarge {
		resp.Error += "; split the upload"
	}
	writeJSON(w, code, resp)
}
