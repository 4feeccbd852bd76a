package keyfilter

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/store"
)

// hostSet is the hosts the store may hold rows of (store.HostLister), while they are at most
// store.MaxListedHosts.
//
// Invariant H1: the host of every key that has a schedule row is in the set, or the set is
// over its bound. It holds as K1 does (keyfilter.go): the set is built at Open from every s/
// key before the committer starts, and the committer adds a key's host when it stages the put
// that creates the key's row, before that row can be in any snapshot. A delete removes
// nothing, so the set errs only towards more hosts: a sweep that reads it stops early less
// often, never wrongly.
type hostSet struct {
	mu    sync.Mutex
	known map[string]struct{} // under mu
	// list is the hosts as a sorted slice, replaced whole on every new host; nil once they
	// passed the bound, for good (until the next Open).
	list atomic.Pointer[[]string]
	many atomic.Bool
}

func newHostSet() *hostSet {
	h := &hostSet{known: map[string]struct{}{}}
	h.list.Store(&[]string{})
	return h
}

// add records that cacheKey may have a schedule row.
func (h *hostSet) add(cacheKey []byte) {
	if h.many.Load() {
		return
	}
	host := cachekey.Host(cacheKey)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.known[string(host)]; ok || h.many.Load() {
		return
	}
	if len(h.known) == store.MaxListedHosts {
		h.many.Store(true)
		h.known = nil
		h.list.Store(nil)
		return
	}
	h.known[string(host)] = struct{}{}
	next := append(slices.Clone(*h.list.Load()), string(host))
	slices.Sort(next)
	h.list.Store(&next)
}

// hosts returns the set, or false once it passed its bound. The slice is shared: read only.
func (h *hostSet) hosts() ([]string, bool) {
	l := h.list.Load()
	if l == nil {
		return nil, false
	}
	return *l, true
}
