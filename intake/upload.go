package intake

import (
	"errors"
	"fmt"

	"github.com/freshq/freshq/wire"
)

// Upload files the items of one POST /v1/targets as they are decoded: each is validated on its
// own (a bad one is rejected with the field it got wrong, the good ones land), and the valid
// ones are gathered in chunks of ChunkItems that Upsert merges with what is stored and writes.
// A key repeated within a chunk is merged over its earlier item (Item.MergeOver) before the
// chunk is written. Counts lands in Resp: accepted, merged, rejected and the first errors.
type Upload struct {
	Resp wire.TargetsResponse

	t           *Targets
	keying      Keying
	chunk       []Item
	inChunk     map[string]int // key → index in chunk
	chunkMerged int            // merges into the chunk being gathered, counted in Resp.Merged
	failedAt    int            // the first item of the chunk the store failed; -1: none
}

// NewUpload starts an upload under the current configuration's devices and key rules.
func (t *Targets) NewUpload() *Upload {
	return &Upload{t: t, keying: KeyingOf(t.Settings()), chunk: make([]Item, 0, ChunkItems),
		inChunk: make(map[string]int, ChunkItems), failedAt: -1}
}

// Reject counts item i as rejected, listing the first MaxReportErrors by index.
func (u *Upload) Reject(i int, field, msg string) {
	u.Resp.Rejected++
	if len(u.Resp.Errors) < MaxReportErrors {
		u.Resp.Errors = append(u.Resp.Errors, wire.ItemError{Index: i, Field: field, Error: msg})
	}
}

// Add takes item i: rejected when invalid, merged into its chunk's earlier item of the same
// key, or added to the chunk, which is written when full. It fails only when the store does
// (a *StoreError); then nothing of that chunk landed.
func (u *Upload) Add(i int, item *wire.TargetItem) error {
	p, err := ParseItem(item, u.keying)
	if err != nil {
		field := ""
		if fe := (*FieldError)(nil); errors.As(err, &fe) {
			field = fe.Field
		}
		u.Reject(i, field, err.Error())
		return nil
	}
	p.Index = i
	if j, ok := u.inChunk[string(p.Key)]; ok {
		u.chunk[j].MergeOver(&p)
		u.Resp.Merged++
		u.chunkMerged++
		return nil
	}
	u.inChunk[string(p.Key)] = len(u.chunk)
	u.chunk = append(u.chunk, p)
	if len(u.chunk) == ChunkItems {
		return u.Flush()
	}
	return nil
}

// Flush writes the chunk gathered so far.
func (u *Upload) Flush() error {
	if len(u.chunk) == 0 {
		return nil
	}
	n, err := u.t.Upsert(u.chunk, u.Reject)
	u.Resp.Accepted += n
	if err != nil {
		// Nothing of the chunk landed: neither its first item nor its merges.
		u.failedAt, u.Resp.Merged = u.chunk[0].Index, u.Resp.Merged-u.chunkMerged
	}
	u.chunk, u.chunkMerged = u.chunk[:0], 0
	clear(u.inChunk)
	return err
}

// FailedAt is the index of the first item of the chunk the store failed, or -1.
func (u *Upload) FailedAt() int { return u.failedAt }

// Check says whether the upload as a whole failed: when items were read but none was accepted,
// it returns a *FieldError (naming no field: each rejected item names its own in Resp.Errors).
func (u *Upload) Check() error {
	if u.Resp.Accepted == 0 && u.Resp.Rejected > 0 {
		return fieldErr("", fmt.Errorf("no item accepted: all %d were rejected (errors lists the first by index)", u.Resp.Rejected))
	}
	return nil
}
