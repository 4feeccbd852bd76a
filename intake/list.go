package intake

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Bounds of List's answer: the pages of one call.
const (
	ListDefault = 50
	ListMax     = 200
)

// errListFull stops the store's iteration once List has what it needs.
var errListFull = errors.New("intake: list full")

// List returns the targets whose URL starts with prefix, of device or, when it names none, of
// every device, in key order (device by name, then URL), at most limit of them (0:
// ListDefault, at most ListMax), after the cursor after (a previous answer's Next, "" for the
// first page). The prefix gets the zero key rules only (case, default port), as Prioritize's:
// a string prefix of stored keys. It reads the store's iteration over schedule keys
// (ForEachSchedule), which both backends serve in key order and which cannot start at a key:
// the keys before the cursor are read and skipped, so a call costs the keys under the prefix
// up to the end of its page (on PostgreSQL, whose iteration reads its range to the end once
// started, every key under the prefix). Its answer is bounded (limit pages); its work grows
// with how deep into a prefix it lists, so a narrow prefix is the cheap search.
func (t *Targets) List(prefix, device, after string, limit int) (wire.PageList, error) {
	out := wire.PageList{Prefix: prefix, Pages: []wire.PageEntry{}}
	if prefix == "" {
		return out, fieldErr("prefix", errors.New("give a URL prefix (https://host/path)"))
	}
	switch {
	case limit == 0:
		limit = ListDefault
	case limit < 0 || limit > ListMax:
		return out, fieldErr("limit", errors.New("between 1 and 200"))
	}
	set := t.Settings()
	devices := []string{device}
	if device == "" {
		devices = slices.Sorted(maps.Keys(set.Devices))
	} else if !set.Devices[device] {
		return out, fieldErr("device", errors.New("unknown device "+device))
	}
	afterDev, afterURL, hasAfter := "", "", after != ""
	if hasAfter {
		var ok bool
		afterDev, afterURL, ok = cachekey.Split([]byte(after))
		if !ok || !slices.Contains(devices, afterDev) {
			return out, fieldErr("after", errors.New("not a cursor of this list: pass the previous answer's next"))
		}
	}
	keying := KeyingOf(set)
	keying.Rules = nil
	var last []byte // the last key visited, of any device: where the next page starts
	for _, dev := range devices {
		if hasAfter && dev < afterDev {
			continue
		}
		kp, err := Key(prefix, dev, keying)
		if err != nil {
			if fe := (*FieldError)(nil); errors.As(err, &fe) && fe.Field == "url" {
				fe.Field = "prefix"
			}
			return out, err
		}
		cursor := []byte(nil)
		if hasAfter && dev == afterDev {
			cursor = cachekey.New(dev, afterURL)
		}
		err = t.store.ForEachSchedule(kp, func(k []byte, row store.Row) error {
			if len(out.Pages) == limit {
				return errListFull
			}
			out.Scanned++
			last = append(last[:0], k...)
			if cursor != nil && bytes.Compare(k, cursor) <= 0 {
				return nil
			}
			_, u, _ := cachekey.Split(k)
			out.Pages = append(out.Pages, wire.PageEntry{URL: u, Device: dev, DueAt: time.UnixMilli(row.DueAtMs).UTC(),
				IntervalSec: float64(row.EffectiveIntervalMs) / 1000, Urgent: row.Lanes.Urgent, Failing: row.Lanes.Failing,
				Submitted: row.Submitted})
			return nil
		})
		if errors.Is(err, errListFull) {
			out.Next = string(last)
			return out, nil
		}
		if err != nil {
			return out, &StoreError{err}
		}
	}
	return out, nil
}
