package intake

import (
	"errors"
	"fmt"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// ConditionalAllowed reports whether a page with target t may be checked instead of
// rendered at now: its origin sent a validator, it has been rendered in full and digested,
// fewer than freshness.conditional_every − 1 checks were answered 304 since, and its last
// full render is younger than freshness.conditional_max_age.
func ConditionalAllowed(set *Settings, t *store.Target, now int64) bool {
	f := &t.Fresh
	fr := &set.Freshness
	return t.HasValidators() && f.Digest != 0 && f.DigestAtMs > 0 &&
		int64(f.Conditional)+1 < int64(fr.ConditionalEvery) &&
		t.LastRender.AtMs > 0 && now-t.LastRender.AtMs < fr.ConditionalMaxAge.Milliseconds()
}

// Validators answers a render worker about to render key.
func (t *Targets) Validators(key []byte) (wire.Validators, error) {
	if len(key) == 0 || len(key) > store.MaxKeyLen {
		return wire.Validators{}, fieldErr("key", fmt.Errorf("must be 1..%d bytes", store.MaxKeyLen))
	}
	tgt, err := t.store.GetTarget(key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return wire.Validators{}, nil
	case err != nil:
		return wire.Validators{}, &kindError{kind: ErrStore, msg: "reading the target", cause: err}
	}
	if !ConditionalAllowed(t.Settings(), &tgt, t.Now()) {
		return wire.Validators{}, nil
	}
	return wire.Validators{Check: true, ETag: tgt.Fresh.ETag, LastModified: tgt.Fresh.LastModified}, nil
}
