package chrome

import (
	"container/list"
	"net/url"
	"strings"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// wrong is what made a render look wrong, as the cold second look judges it: its status when
// 400–599 (the document's, or the page's declared one), its scripts threw, its own data
// requests failed, or some were still pending. The zero value is a render that looks right.
type wrong struct {
	status                      int
	exceptions, failed, pending bool
}

func wrongOf(res render.Result) wrong {
	var w wrong
	if res.Status >= 400 && res.Status <= 599 {
		w.status = res.Status
	}
	if sig := res.Signals; sig != nil {
		w.exceptions, w.failed, w.pending = sig.Exceptions > 0, sig.FailedRequests > 0, sig.PendingRequests > 0
	}
	return w
}

// judged reports whether a render reached the page and judged it (its status, signals and body
// say what the page is), rather than ending without it: a timeout, a crash, a network error.
func judged(res render.Result) bool {
	switch res.Outcome {
	case outcome.OK, outcome.Noindex, outcome.NotFound, outcome.Gone, outcome.ClientError, outcome.ServerError:
		return res.Signals != nil
	}
	return false
}

// siteOf is the site a page belongs to, for what second looks found: the render.domains entry
// its host is under (shop.example.com and api.example.com are the site example.com), else its
// host.
func siteOf(domains []string, u *url.URL) string {
	for _, e := range domains {
		if render.Allowed([]string{e}, u.Host) {
			return strings.ToLower(strings.TrimSpace(e))
		}
	}
	return strings.ToLower(u.Hostname())
}

// maxLookSites bounds the sites a browser remembers second looks for: past it the site written
// longest ago is forgotten (its next wrong-looking render takes a second look again).
const maxLookSites = 1024

// looks is what a browser's cold second looks found, per site, when they found the same as the
// warm render they repeated: the cache did not explain what looked wrong. A render of such a site
// that looks wrong the same way takes no second look, until the browser's cache is next cleared
// (render.chrome.cache_max_age, a cache epoch), which drops them all: the cached scripts that
// could have explained it are gone then, and a deploy since is fetched anew. Under Renderer.mu.
type looks struct {
	order *list.List               // of *lookEntry, the least recently written first
	sites map[string]*list.Element // site → its element in order
}

type lookEntry struct {
	site  string
	found wrong
}

// unhelped reports whether the last second look at site found what found describes, unchanged
// by the cold render.
func (l *looks) unhelped(site string, found wrong) bool {
	if l == nil {
		return false
	}
	e, ok := l.sites[site]
	return ok && e.Value.(*lookEntry).found == found
}

// set remembers that a second look at site found found unchanged, dropping the site written
// longest ago past maxLookSites.
func (l *looks) set(site string, found wrong) {
	if e, ok := l.sites[site]; ok {
		e.Value.(*lookEntry).found = found
		l.order.MoveToBack(e)
		return
	}
	if l.order.Len() >= maxLookSites {
		oldest := l.order.Front()
		l.order.Remove(oldest)
		delete(l.sites, oldest.Value.(*lookEntry).site)
	}
	l.sites[site] = l.order.PushBack(&lookEntry{site: site, found: found})
}

// forget drops site: its last second look changed what looked wrong.
func (l *looks) forget(site string) {
	if l == nil {
		return
	}
	if e, ok := l.sites[site]; ok {
		l.order.Remove(e)
		delete(l.sites, site)
	}
}

// skipSecondLook reports whether the last second look at site on b found the same as found,
// unchanged by its cold render, since the browser's cache was last cleared.
func (r *Renderer) skipSecondLook(b *browser, site string, found wrong) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return b.looks.unhelped(site, found)
}

// noteSecondLook keeps what a second look at site found: warm is the render it repeated, cold
// its own. The same wrong-looking result both ways turns second looks off for the site and that
// result; a cold render that fixed it, or changed it, keeps them on. A cold render that did not
// reach the page found nothing, and changes nothing; neither does a look begun in the cache's
// generation before a clear (gen), whose finding belongs to a cache that is gone.
func (r *Renderer) noteSecondLook(b *browser, gen uint64, site string, warm, cold render.Result) {
	if !judged(cold) {
		return
	}
	found, after := wrongOf(warm), wrongOf(cold)
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.cacheGen != gen {
		return
	}
	if found != after {
		b.looks.forget(site)
		return
	}
	if b.looks == nil {
		b.looks = &looks{order: list.New(), sites: map[string]*list.Element{}}
	}
	b.looks.set(site, found)
}
