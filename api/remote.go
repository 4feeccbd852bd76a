package api

import (
	"net/http"
	"strings"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
)

// Remote serves renderers on other machines: POST /v1/claim takes leased jobs from the same
// ready set (falling back to the index like a local worker), POST /v1/results applies their
// outcomes like a local worker's. A browser farm elsewhere renders exactly like a render worker.
type Remote struct {
	Claimer *claim.Claimer // worker 0's, counting grants in its shm block
	Applier *Applier
}

// Register adds the endpoints to mux.
func (x *Remote) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/claim", x.claim)
	mux.HandleFunc("POST /v1/results", resultsHandler(x.Applier, false)) // JSON only (README)
}

type remoteClaimRequest struct {
	Limit int    `json:"limit"`
	Lease string `json:"lease,omitempty"` // lease TTL, e.g. "5m"; default queue.lease_ttl
}

// RemoteJob is one granted job for a remote renderer. Send its lease back with the result.
type RemoteJob struct {
	Job
	URL    string `json:"url"`
	Device string `json:"device"`
}

func (x *Remote) claim(w http.ResponseWriter, r *http.Request) {
	var req remoteClaimRequest
	if !decodeJSON(w, r, &req, 1<<20) {
		return
	}
	if req.Limit < 1 || req.Limit > 1000 {
		writeError(w, http.StatusBadRequest, "limit", "must be 1..1000")
		return
	}
	ttl := int64(0)
	if req.Lease != "" {
		d, err := config.ParseDuration(req.Lease)
		if err != nil || d.Ms() < 60_000 || d.Ms() > 24*3_600_000 {
			writeError(w, http.StatusBadRequest, "lease", "must be a duration between 1m and 24h")
			return
		}
		ttl = d.Ms()
	}
	jobs, err := x.Claimer.ClaimTTL(r.Context(), req.Limit, ttl)
	if err != nil && len(jobs) == 0 {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	out := make([]RemoteJob, len(jobs))
	for i, j := range jobs {
		device, url := splitKey(j.Key)
		out[i] = RemoteJob{Job: WireJob(j), URL: url, Device: device}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

func splitKey(key []byte) (device, url string) {
	device, url, ok := strings.Cut(string(key), "|")
	if !ok {
		return "", device
	}
	return device, url
}
