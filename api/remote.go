package api

import (
	"net/http"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/leases"
	"github.com/freshq/freshq/wire"
)

// Remote serves renderers on other machines (leases.Remote says what each operation does and
// promises): POST /v1/claim takes leased jobs, POST /v1/results applies their outcomes like a
// local worker's (JSON only, docs/API.md), and POST /v1/leases/extend and /v1/leases/release keep or
// give back a lease.
type Remote struct {
	Claimer *claim.Claimer // worker 0's, counting grants in its shm block
	Applier *apply.Applier
	Limit   *Limiter // admits results requests by their bytes; nil: none

	leases *leases.Remote
}

const maxRemoteRequest = 1 << 20 // a claim or lease request

// Register adds the endpoints to mux.
func (x *Remote) Register(mux *http.ServeMux) {
	a := x.Applier
	// The remote leases are the Applier's: its lease table, locks, settings and clock.
	x.leases = a.NewRemote(x.Claimer)
	mux.HandleFunc("POST /v1/claim", x.claim)
	mux.HandleFunc("POST /v1/results", resultsHandler(a, x.Limit, false))
	mux.HandleFunc("POST /v1/leases/extend", x.extend)
	mux.HandleFunc("POST /v1/leases/release", x.release)
}

func (x *Remote) claim(w http.ResponseWriter, r *http.Request) {
	var req wire.RemoteClaimRequest
	if err := decodeJSON(w, r, &req, maxRemoteRequest); err != nil {
		fail(w, err)
		return
	}
	resp, err := x.leases.Claim(r.Context(), req)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, resp)
}

func (x *Remote) extend(w http.ResponseWriter, r *http.Request) {
	var req wire.LeaseRequest
	if err := decodeJSON(w, r, &req, maxRemoteRequest); err != nil {
		fail(w, err)
		return
	}
	resp, err := x.leases.Extend(req)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, resp)
}

func (x *Remote) release(w http.ResponseWriter, r *http.Request) {
	var req wire.LeaseRequest
	if err := decodeJSON(w, r, &req, maxRemoteRequest); err != nil {
		fail(w, err)
		return
	}
	if err := x.leases.Release(req); err != nil {
		fail(w, err)
		return
	}
	ok(w, map[string]bool{"released": true})
}
