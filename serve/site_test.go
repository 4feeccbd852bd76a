package serve

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Expired pages' rows are moved up within their site's rate, as render.domains names the site:
// pages of five ports and a subdomain of shop.test share its burst (2), so four of the six are
// over the rate; they are served all the same.
func TestStaleMovesUpArePerSite(t *testing.T) {
	n := newNode(t, baseYAML)
	var pages []string
	for i := range 5 {
		pages = append(pages, fmt.Sprintf("https://shop.test:%d/p/%d", 8441+i, i))
	}
	pages = append(pages, "https://www.shop.test/p/w")
	for _, u := range pages {
		n.file(t, u)
		n.render(t, "desktop|"+u, "ok", 200, "<p>old</p>", nil)
	}
	n.Advance(150 * 60_000) // past the cadence and swr of every page, in one step: no token back
	for _, u := range pages {
		if a := n.get("/" + u); a.code != 200 || a.header.Get(HeaderCache) != "stale" {
			t.Fatalf("%s: %d %v", u, a.code, a.header)
		}
	}
	for range 2 {
		<-n.rushed
	}
	rushed := testutil.ToFloat64(n.h.d.Metrics.rushes.WithLabelValues("rushed"))
	over := testutil.ToFloat64(n.h.d.Metrics.rushes.WithLabelValues("over_rate"))
	if rushed != 2 || over != 4 {
		t.Fatalf("rushed %v and over the rate %v, want 2 and 4: one site, one burst", rushed, over)
	}
}
