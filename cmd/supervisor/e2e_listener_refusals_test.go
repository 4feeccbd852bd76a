package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The crawler listener's and the API's refusals, against the built binaries: each request is
// the one a browser, a script or a crawler sends, and each is measured three ways: the answer
// (status, the field its JSON error names), whether a target was filed (asked of the admin
// API), and whether the origin was fetched (its hit count).

// filed reports whether the admin API knows a target for u: GET /v1/targets?url= answers 200.
// Any other answer (404, or 400 for a URL whose key the store cannot hold) means no target.
func (n *node) filed(u string) bool {
	n.t.Helper()
	return n.do("GET", "/v1/targets?url="+url.QueryEscape(u), "", nil).code == http.StatusOK
}

// An item of POST /v1/targets nested deeper than 32 levels is rejected by its index, and the
// items after it land: the body is still readable JSON, only that item is refused.
func TestEndToEndDeepTargetItemIsRejectedAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := startNode(t, t.TempDir(), 1, "", "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	deep := strings.Repeat("[", 33) + strings.Repeat("]", 33)
	body := `[{"url": "https://shop.test/d/1"}, {"url": "https://shop.test/d/2", "interval": ` + deep + `}, {"url": "https://shop.test/d/3"}]`
	var resp struct {
		Accepted, Rejected int
		Errors             []struct{ Index int }
		StoppedAt          *int `json:"stopped_at"`
		Error              string
	}
	code := n.post("/v1/targets", body, &resp)
	if code != http.StatusOK || resp.Accepted != 2 || resp.Rejected != 1 || len(resp.Errors) != 1 || resp.Errors[0].Index != 1 || resp.StoppedAt != nil || resp.Error != "" {
		stopped := "none"
		if resp.StoppedAt != nil {
			stopped = fmt.Sprint(*resp.StoppedAt)
		}
		t.Errorf("an upload with a too-deep second item: %d accepted %d rejected %d errors %+v stopped_at %s error %q; want 200, items 0 and 2 accepted, item 1 rejected",
			code, resp.Accepted, resp.Rejected, resp.Errors, stopped, resp.Error)
	}
	for u, want := range map[string]bool{"https://shop.test/d/1": true, "https://shop.test/d/2": false, "https://shop.test/d/3": true} {
		if got := n.filed(u); got != want {
			t.Errorf("%s filed: %v, want %v", u, got, want)
		}
	}
}
