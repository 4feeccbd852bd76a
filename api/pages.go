package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// Pages serves the page views of the console beyond GET /v1/targets: GET /v1/targets/list
// (the targets under a URL prefix, a bounded page of them at a time) and GET
// /v1/targets/crawlers (a page's crawler requests by family, from the crawler listener's
// bounded per-page tally).
type Pages struct {
	Targets *intake.Targets
	// Crawlers is the crawler listener's per-page tally; nil when worker 0 serves no crawlers
	// (no serve.listen): /v1/targets/crawlers is then 404 naming serve.listen.
	Crawlers *crawlers.PageTally
}

// PageCrawlers is GET /v1/targets/crawlers' answer.
type PageCrawlers struct {
	URL    string `json:"url"`
	Device string `json:"device"`
	Key    string `json:"key"` // the page's cache key, as the crawler listener counts it: device|normalised URL
	crawlers.PageCounts
	Table crawlers.PageTallyStats `json:"table"`
}

// Register adds the endpoints to mux.
func (x *Pages) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/targets/list", x.list)
	mux.HandleFunc("GET /v1/targets/crawlers", x.crawlers)
}

func (x *Pages) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			fail(w, &wire.FieldError{Field: "limit", Err: fmt.Errorf("not a number: %w", err)})
			return
		}
		if n <= 0 {
			n = -1 // 0 is the default's: an explicit 0 is out of range
		}
		limit = n
	}
	l, err := x.Targets.List(r.Context(), q.Get("prefix"), q.Get("device"), q.Get("after"), limit)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, l)
}

func (x *Pages) crawlers(w http.ResponseWriter, r *http.Request) {
	if x.Crawlers == nil {
		fail(w, intake.NewFieldError("serve.listen", fmt.Errorf("%w: worker 0 serves no crawler listener", intake.ErrNotFound)))
		return
	}
	key, err := keyOf(r, x.Targets.Settings())
	if err != nil {
		fail(w, err)
		return
	}
	q := r.URL.Query()
	ok(w, PageCrawlers{URL: q.Get("url"), Device: q.Get("device"), Key: string(key), PageCounts: x.Crawlers.Page(key), Table: x.Crawlers.Stats()})
}
