package api

import (
	"net/http"

	"github.com/freshq/freshq/wire"
)

// CapacityViewFunc is worker 0's capacity view (capacity.Service.View).
type CapacityViewFunc func() wire.Capacity

// Capacity serves GET /internal/capacity on the control socket: the supervisor's scrape reads
// it for the capacity metrics. The supervisor's public listener refuses /internal/ paths.
type Capacity struct {
	View CapacityViewFunc
}

// Register adds the endpoint to mux.
func (c *Capacity) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+wire.PathCapacity, func(w http.ResponseWriter, r *http.Request) {
		ok(w, c.View())
	})
}
