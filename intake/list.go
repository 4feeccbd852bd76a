package intake

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/wire"
)

// Bounds of List's answer: the pages of one call.
const (
	ListDefault = 50
	ListMax     = 200
)

// List returns the targets whose URL starts with prefix, of device or, when it names none, of
// every device, in key order (device by name, then URL), at most limit of them (0:
// ListDefault, at most ListMax), after the cursor after (a previous answer's Next, "" for the
// first page). The prefix gets the zero key rules only (case, default port), as Prioritize's:
// a string prefix of stored keys. It reads the store's bounded iteration (ListSchedule), which
// starts strictly after the cursor's key (a seek on Badger, a primary key range scan on
// PostgreSQL) and asks for one row more than the page still needs, to know whether another
// page follows: a call reads at most limit+1 schedule rows, on a prefix's last page as on its
// first, however many keys the prefix holds.
func (t *Targets) List(ctx context.Context, prefix, device, after string, limit int) (wire.PageList, error) {
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
	var last []byte // the key of the last page listed: where the next page starts
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
		var cursor []byte
		if hasAfter && dev == afterDev {
			cursor = cachekey.New(dev, afterURL)
		}
		rows, err := t.store.ListSchedule(ctx, kp, cursor, limit+1-len(out.Pages))
		if err != nil {
			return out, &StoreError{err}
		}
		out.Scanned += len(rows)
		for _, r := range rows {
			if len(out.Pages) == limit {
				out.Next = string(last)
				return out, nil
			}
			last = r.Key
			_, u, _ := cachekey.Split(r.Key)
			out.Pages = append(out.Pages, wire.PageEntry{URL: u, Device: dev, DueAt: time.UnixMilli(r.DueAtMs).UTC(),
				IntervalSec: float64(r.EffectiveIntervalMs) / 1000, Urgent: r.Lanes.Urgent, Failing: r.Lanes.Failing,
				Submitted: r.Submitted})
		}
	}
	return out, nil
}
