package api

import (
	"net/http"

	"github.com/freshq/freshq/intake"
)

// Explain serves GET /v1/targets (what the queue makes of a target) and DELETE /v1/targets.
type Explain struct {
	Targets *intake.Targets // worker 0's one targets service (intake.NewTargets)
}

// Deleter is the store's delete.
type Deleter = intake.Deleter

// Register adds the endpoints to mux.
func (x *Explain) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/targets", x.get)
	mux.HandleFunc("DELETE /v1/targets", x.delete)
}

// keyOf reads ?url=&device= into a cache key (intake.Key).
func keyOf(r *http.Request, set *intake.Settings) ([]byte, error) {
	return intake.Key(r.URL.Query().Get("url"), r.URL.Query().Get("device"), intake.KeyingOf(set))
}

func (x *Explain) targets() *intake.Targets { return x.Targets }

// get explains a target (intake.Targets.Explain).
func (x *Explain) get(w http.ResponseWriter, r *http.Request) {
	key, err := keyOf(r, x.Targets.Settings())
	if err != nil {
		fail(w, err)
		return
	}
	ex, err := x.targets().Explain(key)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, ex)
}

// delete removes the target, its schedule row, its index entry and its page
// (intake.Targets.Delete, which says why a 200 is never undone by a render in flight).
func (x *Explain) delete(w http.ResponseWriter, r *http.Request) {
	key, err := keyOf(r, x.Targets.Settings())
	if err != nil {
		fail(w, err)
		return
	}
	if err := x.targets().Delete(key); err != nil {
		fail(w, err)
		return
	}
	ok(w, map[string]any{"deleted": string(key)})
}
