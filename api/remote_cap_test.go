package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// Remotes together hold at most half the lease table, whatever names they claim under: one
// remote rotating renderer names (one shared token) cannot starve the local render workers.
// The claim that would pass the total is trimmed to it; one past it is 429 naming limit.
func TestRemoteLeasesCappedTogether(t *testing.T) {
	e, srv := remoteServer(t, "  max_leases: 32\n  max_remote_leases: 32\n")
	total := e.Seg.Leases().Capacity() / 2
	var a wire.RemoteClaimResponse
	if code, ae := postJSON(t, srv, "/v1/claim", `{"limit": 20, "renderer": "a"}`, &a); code != 200 || len(a.Jobs) != total {
		t.Fatalf("claim of 20 by a: %d %+v, %d jobs; want trimmed to %d", code, ae, len(a.Jobs), total)
	}
	for i := range 3 {
		code, ae := postJSON(t, srv, "/v1/claim", fmt.Sprintf(`{"limit": 1, "renderer": "r%d"}`, i), nil)
		if code != 429 || ae.Field != "limit" || !strings.Contains(ae.Error, "all remote renderers") {
			t.Fatalf("renderer r%d past the total: %d %+v", i, code, ae)
		}
	}
	// Local workers still have the other half.
	if n := e.Seg.Leases().CountHolders(e.Now(), intake.IsRemoteHolder); n != total {
		t.Fatalf("remotes hold %d, want %d", n, total)
	}
}
