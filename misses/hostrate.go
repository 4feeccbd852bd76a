package misses

import (
	"math"
	"sync"
)

// maxLimitedHosts bounds the hosts a HostRate remembers. Misses are only rendered for hosts
// render.domains allows, so the table is small in practice; past the bound the hosts whose
// bucket is full again (they have had nothing to refuse for a while) are forgotten first, and a
// table of only busy hosts refuses a new one rather than grow.
const maxLimitedHosts = 4096

// HostRate is a token bucket per host: how many new targets renders on miss may create
// (serve.miss_rate a second with a burst of serve.miss_burst), or how many expired pages' rows
// the crawler listener moves up. The zero value is ready; it is safe for concurrent use.
type HostRate struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	atMs   int64
}

// Take takes one token of host's bucket at nowMs under rate (a second) and burst. It returns
// whether it got one and, if not, how many seconds until one is there.
func (l *HostRate) Take(host string, nowMs int64, rate float64, burst int) (ok bool, retryAfterSec int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[host]
	if b == nil {
		if len(l.buckets) >= maxLimitedHosts && !l.forget(nowMs, rate, burst) {
			return false, int(math.Ceil(1 / rate))
		}
		b = &bucket{tokens: float64(burst), atMs: nowMs}
		l.buckets[host] = b
	}
	b.refill(nowMs, rate, burst)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, max(1, int(math.Ceil((1-b.tokens)/rate)))
}

func (b *bucket) refill(nowMs int64, rate float64, burst int) {
	if nowMs > b.atMs {
		b.tokens = math.Min(float64(burst), b.tokens+float64(nowMs-b.atMs)/1000*rate)
		b.atMs = nowMs
	}
}

// forget drops the buckets that are full again; it reports whether any was. l.mu is held.
func (l *HostRate) forget(nowMs int64, rate float64, burst int) bool {
	dropped := false
	for h, b := range l.buckets {
		if b.refill(nowMs, rate, burst); b.tokens >= float64(burst) {
			delete(l.buckets, h)
			dropped = true
		}
	}
	return dropped
}
