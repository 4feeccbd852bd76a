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
)

// Verdicts are the verification label values, in the order views list them.
var Verdicts = []string{Verified, Unverified, Unverifiable, Unchecked, NotACrawler}

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
// slot or an answer), failed (DNS failed otherwise), no_slot (no lookup slot freed in time).
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

	mu    sync.Mutex
	cache map[cacheKey]*list.Element
	order *list.List // front: the most recently stored
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
		cache: make(map[cacheKey]*list.Element), order: list.New()}
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
// end included. f nil is NotACrawler; an invalid addr is Unchecked.
func (v *Verifier) Verify(ctx context.Context, f *Family, addr netip.Addr) string {
	switch {
	case f == nil:
		return NotACrawler
	case !f.Verifiable():
		return Unverifiable
	case !addr.IsValid():
		return Unchecked
	case f.inRanges(addr):
		return Verified
	case len(f.suffixes) == 0:
		return Unverified
	}
	key := cacheKey{f.name, addr}
	if ok, cached := v.cached(key); cached {
		return verdict(ok)
	}
	ctx, cancel := context.WithTimeout(ctx, v.opts.Timeout)
	defer cancel()
	select {
	case v.sem <- struct{}{}:
	case <-ctx.Done():
		v.lookups[3].Add(1)
		return Unverified // not cached: the next request may find a slot
	}
	ok, answered := v.lookup(ctx, f, addr)
	<-v.sem
	switch {
	case answered:
		v.lookups[0].Add(1)
	case ctx.Err() != nil:
		v.lookups[1].Add(1)
	default:
		v.lookups[2].Add(1)
	}
	if answered {
		v.store(key, ok)
	} else {
		// A lookup that timed out is kept too, so that a resolver that hangs costs each
		// address one timeout a TTL, not one a request.
		v.store(key, false)
	}
	return verdict(ok)
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

func (v *Verifier) cached(key cacheKey) (verified, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
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

// store keeps a verdict, dropping the oldest stored past Options.CacheEntries.
func (v *Verifier) store(key cacheKey, verified bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
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
