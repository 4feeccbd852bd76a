package crawlers

import (
	"slices"
	"sync/atomic"
)

// Tally counts the crawler listener's page answers per family and verdict: what each family
// got (hit, stale, miss) and so how fresh, for /v1/queue's freshness view. Its cells are
// Families × Verdicts, fixed, whatever the requests. Safe for concurrent use.
type Tally struct {
	cells [len12][len6]cell
}

const (
	len12 = 12 // len(Families)
	len6  = 6  // len(Verdicts)
)

type cell struct{ hit, stale, miss, refused atomic.Uint64 }

// What a counted request got.
const (
	GotHit     = "hit"
	GotStale   = "stale"
	GotMiss    = "miss"    // rendered on miss, or refused while trying
	GotRefused = "refused" // a page not stored, and no render for an unverified claim
)

// Note counts one answer of a crawler request of family (a Families name) under verdict.
// Anything else is not counted.
func (t *Tally) Note(family, verdict, got string) {
	if t == nil {
		return
	}
	f, v := slices.Index(Families, family), slices.Index(Verdicts, verdict)
	if f < 0 || v < 0 {
		return
	}
	c := &t.cells[f][v]
	switch got {
	case GotHit:
		c.hit.Add(1)
	case GotStale:
		c.stale.Add(1)
	case GotMiss:
		c.miss.Add(1)
	case GotRefused:
		c.refused.Add(1)
	}
}

// Row is one family and verdict's counts.
type Row struct {
	Family       string  `json:"family"`
	Verification string  `json:"verification"`
	Requests     uint64  `json:"requests"` // every answer counted: hit + stale + miss + refused
	Hit          uint64  `json:"hit"`
	Stale        uint64  `json:"stale"`
	Miss         uint64  `json:"miss"`
	Refused      uint64  `json:"refused"`     // not stored, not rendered: an unverified claim
	StaleShare   float64 `json:"stale_share"` // stale ÷ the pages served (hit + stale + miss); 0 with none
}

// Rows are the families and verdicts with a request counted, in Families then Verdicts order.
func (t *Tally) Rows() []Row {
	rows := []Row{}
	if t == nil {
		return rows
	}
	for i, fam := range Families {
		for j, ver := range Verdicts {
			c := &t.cells[i][j]
			r := Row{Family: fam, Verification: ver, Hit: c.hit.Load(), Stale: c.stale.Load(), Miss: c.miss.Load(), Refused: c.refused.Load()}
			r.Requests = r.Hit + r.Stale + r.Miss + r.Refused
			if r.Requests == 0 {
				continue
			}
			if served := r.Hit + r.Stale + r.Miss; served > 0 {
				r.StaleShare = float64(r.Stale) / float64(served)
			}
			rows = append(rows, r)
		}
	}
	return rows
}
