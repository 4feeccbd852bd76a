package api

import (
	"net/http"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// maxKeysRequest bounds a POST /v1/keys/migrate body: {"limit": N}.
const maxKeysRequest = 4 << 10

// Keys serves the cache-key migration: GET /v1/keys/check counts the stored keys the key
// rules in force would change, read-only; POST /v1/keys/migrate moves up to limit of them
// (intake.Targets.MigrateKeys), deleting the old keys as DELETE /v1/targets does.
type Keys struct {
	Targets *intake.Targets // worker 0's one targets service (intake.NewTargets)
}

// Register adds the endpoints to mux.
func (k *Keys) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/keys/check", k.check)
	mux.HandleFunc("POST /v1/keys/migrate", k.migrate)
}

func (k *Keys) intake() *intake.Targets {
	return k.Targets
}

func (k *Keys) check(w http.ResponseWriter, r *http.Request) {
	c, err := k.intake().CheckKeys(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, c)
}

// migrate takes an optional body {"limit": N}; an empty body is the default limit.
func (k *Keys) migrate(w http.ResponseWriter, r *http.Request) {
	var req wire.KeysMigrateRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req, maxKeysRequest); err != nil {
			fail(w, err)
			return
		}
	}
	m, err := k.intake().MigrateKeys(r.Context(), req.Limit)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, m)
}
