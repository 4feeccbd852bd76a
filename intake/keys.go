package intake

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Key migration: when the key rules change (keys.drop_params, a route's keep_params or
// trailing_slash, or freshq's own normalisation), stored targets keep the keys they were
// filed under, and a request for the same page now builds another key. CheckKeys counts them;
// MigrateKeys moves them.
//
// Moving one key, old → new, under both keys' locks:
//
//  1. if new holds no record, or holds one whose page is older than old's (a missing page is
//     the oldest), old's schedule, target and page are written under new in one funnel write
//     (the target's URL becomes new's);
//  2. old is deleted (schedule, index entry, target and page at once), and its lease revoked,
//     as DELETE /v1/targets does: a render of it in flight cannot bring it back.
//
// The two steps are two transactions, and a migrate interrupted between them leaves old and an
// equal copy under new. That is safe: the next migrate finds old again, new is taken by a
// record whose page is as new as old's, so step 1 writes nothing and step 2 deletes old. A
// key already moved is not found again (its new key normalises to itself: the rules are
// idempotent), so a restarted migrate continues where the last one stopped.

// Limits of a migrate call.
const (
	MigrateLimitDefault = 1000
	MigrateLimitMax     = 100_000
	checkExamples       = 10
)

// errEnough stops a scan early; it never leaves this file.
var errEnough = errors.New("enough")

// rekey is the key the rules in force give a stored key, and whether it can have one (false:
// its URL does not normalise, or the new key exceeds the store's limit).
func rekey(rules *cachekey.Rules, key []byte) ([]byte, bool) {
	device, u, ok := cachekey.Split(key)
	if !ok {
		return nil, false
	}
	n, err := rules.Normalize(u)
	if err != nil {
		return nil, false
	}
	nk := cachekey.New(device, n)
	return nk, len(nk) <= store.MaxKeyLen
}

// CheckKeys scans every stored key, read-only, and reports how many the key rules in force
// would change.
func (t *Targets) CheckKeys(ctx context.Context) (wire.KeysCheck, error) {
	rules := t.Policy().Keys()
	out := wire.KeysCheck{Examples: []wire.KeyMove{}}
	err := t.store.ForEachSchedule(nil, func(key []byte, _ store.Row) error {
		if out.Scanned%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		out.Scanned++
		nk, ok := rekey(rules, key)
		switch {
		case !ok:
			out.Unkeyable++
		case !bytes.Equal(nk, key):
			out.Changed++
			if len(out.Examples) < checkExamples {
				out.Examples = append(out.Examples, wire.KeyMove{From: string(key), To: string(nk)})
			}
		}
		return nil
	})
	if err != nil {
		return out, &StoreError{err}
	}
	return out, nil
}

// MigrateKeys moves at most limit stored keys to the keys the rules in force give them (see
// the comment at the top of this file), stopping early when ctx ends: every key is either
// moved or left whole. Done says whether any key was left to move.
func (t *Targets) MigrateKeys(ctx context.Context, limit int) (wire.KeysMigrate, error) {
	var out wire.KeysMigrate
	if limit == 0 {
		limit = MigrateLimitDefault
	}
	if limit < 0 || limit > MigrateLimitMax {
		return out, fieldErr("limit", fmt.Errorf("must be 0..%d, got %d", MigrateLimitMax, limit))
	}
	rules := t.Policy().Keys()
	var moves [][2][]byte
	err := t.store.ForEachSchedule(nil, func(key []byte, _ store.Row) error {
		if nk, ok := rekey(rules, key); ok && !bytes.Equal(nk, key) {
			if len(moves) == limit {
				return errEnough
			}
			moves = append(moves, [2][]byte{bytes.Clone(key), nk})
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return out, &StoreError{err}
	}
	out.Done = err == nil
	for _, m := range moves {
		if ctx.Err() != nil {
			out.Done = false
			return out, nil
		}
		if err := t.moveKey(m[0], m[1], &out); err != nil {
			out.Done = false
			return out, err
		}
	}
	return out, nil
}

// moveKey moves one key, old → new, and counts it in out.
func (t *Targets) moveKey(old, new []byte, out *wire.KeysMigrate) error {
	defer t.lock([][]byte{old, new})()
	row, err := t.store.GetSchedule(old)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted meanwhile: nothing to move
	} else if err != nil {
		return &StoreError{err}
	}
	tgt, err := t.store.GetTarget(old)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return &StoreError{err}
	}
	hasTarget := err == nil
	oldAt, page, err := t.pageAt(old)
	if err != nil {
		return err
	}
	_, err = t.store.GetSchedule(new)
	taken := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return &StoreError{err}
	}
	write := !taken
	if taken {
		newAt, _, err := t.pageAt(new)
		if err != nil {
			return err
		}
		write = oldAt > newAt
	}
	if write {
		sch, err := store.NewSchedule(new, row.DueAtMs, row.Submitted, row.EffectiveIntervalMs, row.Lanes)
		if err == nil {
			sch, err = keepRank(sch, row)
		}
		if err != nil {
			return fmt.Errorf("keys: schedule of %q: %w", new, err)
		}
		w := store.Write{Schedule: sch, Page: page}
		if hasTarget {
			_, tgt.URL, _ = cachekey.Split(new)
			w.Target = &tgt
		}
		if err := t.writer().WriteSchedules([]store.Write{w}); err != nil {
			return &StoreError{err}
		}
	}
	if err := t.deleteLocked(old); err != nil {
		return err
	}
	switch {
	case !taken:
		out.Moved++
	case write:
		out.Replaced++
	default:
		out.Kept++
	}
	return nil
}

// pageAt is key's page and when it was rendered; -1 and nil when it has none.
func (t *Targets) pageAt(key []byte) (int64, *store.Page, error) {
	pg, err := t.store.GetPage(key)
	if errors.Is(err, store.ErrNotFound) {
		return -1, nil, nil
	} else if err != nil {
		return 0, nil, &StoreError{err}
	}
	return pg.RenderedAtMs, &pg, nil
}
