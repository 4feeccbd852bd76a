package wire

import "time"

// PageList is GET /v1/targets/list's answer: the stored targets whose URL starts with a
// prefix, in key order (device, then URL), one page of them.
type PageList struct {
	Prefix string      `json:"prefix"`
	Pages  []PageEntry `json:"pages"`
	// Next is the cursor of the following page (pass it as after=), "" when the list is done.
	Next string `json:"next,omitempty"`
	// Scanned is how many keys the store's iteration handed over for this page: what the
	// page cost, at most its limit+1 (the page and the key that says another follows)
	// wherever the cursor lies.
	Scanned int `json:"scanned"`
}

// PageEntry is one target of a PageList: its schedule row's figures.
type PageEntry struct {
	URL         string    `json:"url"`
	Device      string    `json:"device"`
	DueAt       time.Time `json:"due_at"`
	IntervalSec float64   `json:"interval_sec"` // the row's cadence; 0: the configuration's
	Urgent      bool      `json:"urgent"`
	Failing     bool      `json:"failing"`
	Submitted   bool      `json:"submitted"`
}
