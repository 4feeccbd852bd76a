package netidle

import (
	"container/list"
	"net/url"
	"strings"
	"sync"
)

// maxLongPolls bounds the long-poll URLs a browser remembers: past it the one learnt longest ago
// is forgotten (its next render waits for it again, up to render.chrome.data_wait).
const maxLongPolls = 1024

// LongPolls are the URLs (without their query) of the same-site requests a browser's renders
// found still in flight past render.chrome.data_wait, or answered with a stream (Streams):
// long-polls. Until the page reaches
// data_wait, a long-poll and a slow API look the same (open, nothing answered), and the rule is
// to wait for a slow API; once a URL has been seen to outlive data_wait, a request to it no longer
// holds a page of the site, so each page with a long-poll costs data_wait once per browser, not on
// every render. Such a request is still the page's own data request in flight: the render reports
// it pending (render.Signals), and the verdict judges that against the page's last good render,
// so a slow API taken for a long-poll (one that once took longer than data_wait) cannot make a
// page that lost its content good. A URL is forgotten when a request to it is answered (it was a
// slow answer), and every one when the browser's cache is cleared (render.chrome.cache_max_age,
// a cache epoch). Safe for concurrent use; the zero value is empty.
type LongPolls struct {
	mu    sync.Mutex
	order *list.List               // of string keys, the one learnt longest ago first
	keys  map[string]*list.Element // key → its element in order
}

// pollKey is what a request's URL is remembered by: scheme, host and path, the query and
// fragment dropped (a long-poll asks with a cursor: ?since=…).
func pollKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + u.EscapedPath()
}

// Known reports whether raw's URL was found to be a long-poll.
func (p *LongPolls) Known(raw string) bool {
	k := pollKey(raw)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.keys[k]
	return ok && k != ""
}

// Learn remembers raw's URL as a long-poll, forgetting the one learnt longest ago past
// maxLongPolls.
func (p *LongPolls) Learn(raw string) {
	k := pollKey(raw)
	if k == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys == nil {
		p.order, p.keys = list.New(), map[string]*list.Element{}
	}
	if e, ok := p.keys[k]; ok {
		p.order.MoveToBack(e)
		return
	}
	if p.order.Len() >= maxLongPolls {
		oldest := p.order.Front()
		p.order.Remove(oldest)
		delete(p.keys, oldest.Value.(string))
	}
	p.keys[k] = p.order.PushBack(k)
}

// Forget drops raw's URL: a request to it was answered.
func (p *LongPolls) Forget(raw string) {
	k := pollKey(raw)
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.keys[k]; ok {
		p.order.Remove(e)
		delete(p.keys, k)
	}
}

// Clear forgets every URL.
func (p *LongPolls) Clear() {
	p.mu.Lock()
	p.order, p.keys = nil, nil
	p.mu.Unlock()
}
