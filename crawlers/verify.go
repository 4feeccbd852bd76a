package crawlers

import (
	"container/list"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Verdicts: what verification said of a request, the label values of verification.
const (
	Verified     = "verified"     // its address is the family's (a confirmed reverse name, or a published range)
	Unverified   = "unverified"   // it claims a verifiable family and its address is not shown to be the family's
	Unverifiable = "unverifiable" // its family documents no verification the table holds
	Unchecked    = "unchecked"    // verification is off (serve.verify_crawlers), or no client address is known
	NotACrawler  = "none"         // its User-Agent claims no crawler
	// Pending: answered before its address's verdict was known (Verifier.Known), its lookup
	// running in the background (or, no lookup slot free then, left to a later request).
	Pending = "pending"
)

// Verdicts are the verification label values, in the order views list them.
var Verdicts = []string{Verified, Unverified, Unverifiable, Unchecked, NotACrawler, Pending}

// Resolver is what verification asks DNS: *net.Resolver has both.
type Resolver interface {
	LookupAddr(ctx context.Context, addr string) ([]string, error)
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options bound verification (serve.verify.*).
type Options struct {
	Timeout      time.Duration // one verification, reverse and forward lookups and the wait for a slot
	Concurrency  int           // lookups at once
	CacheEntries int           // verdicts kept
	CacheTTL     time.Duration // how long a verdict is kept, positive or negative
}

// Outcomes of a verification that was not answered from the cache, the outcome label of
// Lookups: answered (DNS said yes or no), timeout (Options.Timeout passed first: a lookup
// slot or an answer), failed (DNS failed otherwise), no_slot (no lookup slot freed in time, or
// none was free for a lookup Known would have started in the background).
var Outcomes = []string{"answered", "timeout", "failed", "no_slot"}

// Lookups is how many verifications ended with each of Outcomes.
func (v *Verifier) Lookups() map[string]uint64 {
	out := make(map[string]uint64, len(Outcomes))
	for i, o := range Outcomes {
		out[o] = v.lookups[i].Load()
	}
	return out
}

// maxNames bounds the reverse names of an address that are confirmed forward.
const maxNames = 4

// Verifier verifies claimed crawlers' addresses and caches the verdicts. Safe for concurrent use.
type Verifier struct {
	res  Resolver
	opts Options
	now  func() time.Time
	sem  chan struct{}

	// lookups counts the verifications that asked DNS, by outcome (Outcomes' order).
	lookups [4]atomic.Uint64

	mu       sync.Mutex
	cache    map[cacheKey]*list.Element
	order    *list.List // front: the most recently stored
	inflight map[cacheKey]*flight
}

// flight is one lookup of a family and address, which every request for them while it runs
// waits on (Verify) or leaves running (Known): never two at once for one address.
type flight struct {
	done chan struct{} // closed once ok is set and the verdict stored
	ok   bool
}

type cacheKey struct {
	family string
	addr   netip.Addr
}

type cacheEntry struct {
	key      cacheKey
	verified bool
	until    time.Time
}

// NewVerifier returns a verifier asking res, within opts (each at least 1), with now its clock
// for the cache's TTL (time.Now when nil).
func NewVerifier(res Resolver, opts Options, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	opts.Concurrency = max(opts.Concurrency, 1)
	opts.CacheEntries = max(opts.CacheEntries, 1)
	return &Verifier{res: res, opts: opts, now: now, sem: make(chan struct{}, opts.Concurrency),
		cache: make(map[cacheKey]*list.Element), order: list.New(), inflight: make(map[cacheKey]*flight)}
}

// Len is how many verdicts the cache holds.
func (v *Verifier) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.order.Len()
}

// Verify is the verdict on a request of family f from addr: Unverifiable for a family without
// verification, Verified for an address in its ranges or whose reverse name is the family's
// and resolves back to it, else Unverified, also when a lookup fails or does not answer within
// Options.Timeout, or no lookup slot frees within it. It never waits past the timeout, ctx's
// end included. f nil is NotACrawler; an invalid addr is Unchecked. A lookup already running
// for f and addr (one Known started) is waited for, not started again.
func (v *Verifier) Verify(ctx context.Context, f *Family, addr netip.Addr) string {
	if s, done := v.quick(f, addr); done {
		return s
	}
	key := cacheKey{f.name, addr}
	tctx, cancel := context.WithTimeout(ctx, v.opts.Timeout)
	defer cancel()
	fl, known, ok := v.join(key)
	switch {
	case known:
		return verdict(ok)
	case fl != nil: // another request's lookup: waited for within this request's timeout
		select {
		case <-fl.done:
			return verdict(fl.ok)
		case <-tctx.Done():
			return Unverified
		}
	}
	select {
	case v.sem <- struct{}{}:
	case <-tctx.Done():
		v.lookups[3].Add(1)
		return Unverified // not cached: the next request may find a slot
	}
	// Run under this request's deadline, but not its cancellation: requests that joined the
	// flight still wait for it. The flight ends by that deadline, so waiting for it is bounded.
	deadline, _ := tctx.Deadline()
	fctx, fcancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	fl, mine := v.start(fctx, fcancel, key, f, addr)
	end := ctx.Done() // this lookup ends by this request's deadline: waited for to its end
	if !mine {
		end = tctx.Done() // one started meanwhile, under its own deadline
	}
	select {
	case <-fl.done:
		return verdict(fl.ok)
	case <-end:
		return Unverified
	}
}

// Known is the verdict on a request of family f from addr as known now, without waiting: as
// Verify's when it needs no lookup or one is cached, else Pending, and a lookup of addr is
// started in the background (within Options.Timeout from now, holding one of the
// Options.Concurrency slots) unless one is running already or no slot is free (counted
// no_slot; a later request tries again). The verdict it finds is cached for the next request.
func (v *Verifier) Known(f *Family, addr netip.Addr) string {
	if s, done := v.quick(f, addr); done {
		return s
	}
	key := cacheKey{f.name, addr}
	fl, known, ok := v.join(key)
	switch {
	case known:
		return verdict(ok)
	case fl != nil:
		return Pending
	}
	select {
	case v.sem <- struct{}{}:
	default:
		v.lookups[3].Add(1)
		return Pending
	}
	ctx, cancel := context.WithTimeout(context.Background(), v.opts.Timeout)
	v.start(ctx, cancel, key, f, addr)
	return Pending
}

// quick is the verdict that needs neither the cache nor DNS, done false when it needs them.
func (v *Verifier) quick(f *Family, addr netip.Addr) (string, bool) {
	switch {
	case f == nil:
		return NotACrawler, true
	case !f.Verifiable():
		return Unverifiable, true
	case !addr.IsValid():
		return Unchecked, true
	case f.inRanges(addr):
		return Verified, true
	case len(f.suffixes) == 0:
		return Unverified, true
	}
	return "", false
}

// join is key's cached verdict (known), else the lookup running for it (fl), else neither.
func (v *Verifier) join(key cacheKey) (fl *flight, known, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ok, known := v.cachedLocked(key); known {
		return nil, true, ok
	}
	return v.inflight[key], false, false
}

// start runs a lookup of key in the background under ctx, holding the slot its caller took
// (given back when it ends), mine true; or, when another started one meanwhile, gives the
// slot back and returns that one.
func (v *Verifier) start(ctx context.Context, cancel context.CancelFunc, key cacheKey, f *Family, addr netip.Addr) (fl *flight, mine bool) {
	v.mu.Lock()
	if fl := v.inflight[key]; fl != nil {
		v.mu.Unlock()
		<-v.sem
		cancel()
		return fl, false
	}
	fl = &flight{done: make(chan struct{})}
	v.inflight[key] = fl
	v.mu.Unlock()
	go func() {
		defer cancel()
		ok, answered := v.lookup(ctx, f, addr)
		<-v.sem
		switch {
		case answered:
			v.lookups[0].Add(1)
		case ctx.Err() != nil || pastDeadline(ctx):
			v.lookups[1].Add(1)
		default:
			v.lookups[2].Add(1)
		}
		// A lookup that timed out or failed is kept too (unverified), so that a resolver
		// that hangs costs each address one timeout a TTL, not one a request.
		v.mu.Lock()
		v.storeLocked(key, ok && answered)
		delete(v.inflight, key)
		fl.ok = ok && answered
		v.mu.Unlock()
		close(fl.done)
	}()
	return fl, true
}

// pastDeadline reports whether ctx's deadline has come: a resolver that gives up at the
// deadline itself (its read deadline is ctx's) may return before ctx's own timer has ended ctx.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func verdict(ok bool) string {
	if ok {
		return Verified
	}
	return Unverified
}

// lookup asks the reverse names of addr and confirms forward the first maxNames of them that
// are the family's. answered is false when a lookup failed otherwise than by "no such name".
func (v *Verifier) lookup(ctx context.Context, f *Family, addr netip.Addr) (ok, answered bool) {
	names, err := v.res.LookupAddr(ctx, addr.String())
	if err != nil && !notFound(err) {
		return false, false
	}
	tried := 0
	for _, name := range names {
		if !f.nameMatches(name) {
			continue
		}
		if tried++; tried > maxNames {
			break
		}
		addrs, err := v.res.LookupNetIP(ctx, "ip", name)
		if err != nil {
			if !notFound(err) {
				return false, false
			}
			continue
		}
		for _, a := range addrs {
			if a.Unmap() == addr {
				return true, true
			}
		}
	}
	return false, true
}

func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

func (v *Verifier) cachedLocked(key cacheKey) (verified, ok bool) {
	el, ok := v.cache[key]
	if !ok {
		return false, false
	}
	e := el.Value.(*cacheEntry)
	if !v.now().Before(e.until) {
		v.order.Remove(el)
		delete(v.cache, key)
		return false, false
	}
	return e.verified, true
}

// storeLocked keeps a verdict, dropping the oldest stored past Options.CacheEntries.
func (v *Verifier) storeLocked(key cacheKey, verified bool) {
	until := v.now().Add(v.opts.CacheTTL)
	if el, ok := v.cache[key]; ok {
		e := el.Value.(*cacheEntry)
		e.verified, e.until = verified, until
		v.order.MoveToFront(el)
		return
	}
	for v.order.Len() >= v.opts.CacheEntries {
		old := v.order.Back()
		v.order.Remove(old)
		delete(v.cache, old.Value.(*cacheEntry).key)
	}
	v.cache[key] = v.order.PushFront(&cacheEntry{key: key, verified: verified, until: until})
}
