package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/wire"
)

// End-to-end tests of what worker 0 takes in: target uploads, remote claims and their leases,
// against the real supervisor and workers.

// seedOneMs files n targets all due at the same millisecond, as a bulk import does.
func seedOneMs(t testing.TB, dataDir string, n int) {
	st, err := badgerstore.Open(filepath.Join(dataDir, "db"), &badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	due := clock.NowMs() - 60_000
	ws := make([]store.Write, 0, n)
	for i := range n {
		u := fmt.Sprintf("https://shop%d.test/c/bulk-%05d", i%4, i) // four hosts: no host has more than 1,024 in flight (render.hosts)
		sch, err := store.NewSchedule([]byte("desktop|"+u), due, true, 0, store.Lanes{NeverRendered: true})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: sch, Target: &store.Target{URL: u, Device: "desktop", Source: store.SourceSitemap}})
	}
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
}

// post sends a JSON body (a string is sent as it is) and decodes a JSON answer into out.
func (n *node) post(path string, in, out any) int {
	n.t.Helper()
	b, ok := in.(string)
	if !ok {
		raw, _ := json.Marshal(in)
		b = string(raw)
	}
	resp, err := http.Post("http://"+n.addr+path, "application/json", strings.NewReader(b))
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			n.t.Fatalf("POST %s: %d, reading the answer: %v", path, resp.StatusCode, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			n.t.Fatalf("POST %s: %d, decoding %d bytes of answer: %v", path, resp.StatusCode, len(raw), err)
		}
	}
	return resp.StatusCode
}

func waitReady(t *testing.T, n *node) {
	t.Helper()
	waitFor(t, "readiness", 30*time.Second, n.ready)
}

// A body that breaks after 1,001 items answers 400 with exactly what landed: the count, and the
// index where the body stopped; the items before it are stored.
func TestE2ETargetsReportWhatLanded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	n := startNode(t, dir, 1, "", "")
	waitReady(t, n)
	var b bytes.Buffer
	b.WriteString("[")
	for i := range 1001 {
		fmt.Fprintf(&b, `{"url": "https://shop.test/c/up-%d", "interval": "6h"},`, i)
	}
	b.WriteString(`{"url": "https://shop.test/c/up-x"]`)
	var out wire.TargetsResponse
	if code := n.post("/v1/targets", b.String(), &out); code != 400 || out.Accepted != 1001 || out.StoppedAt == nil || *out.StoppedAt != 1001 || out.Error == "" {
		t.Fatalf("%d %+v", code, out)
	}
	resp, err := http.Get("http://" + n.addr + "/v1/targets?url=" + url.QueryEscape("https://shop.test/c/up-1000"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("item 1000 did not land: %d", resp.StatusCode)
	}
	// A repeated key merges in order, an omitted source keeps the stored one, a due time in
	// 1970 is refused naming due.
	code := n.post("/v1/targets", `[{"url": "https://shop.test/c/m", "source": "discovered"}, {"url": "https://shop.test/c/m", "interval": "12h"},
		{"url": "https://shop.test/c/old", "due": "1970-01-01T00:00:00Z"}]`, &out)
	if code != 200 || out.Accepted != 2 || out.Merged != 1 || out.Rejected != 1 || out.Errors[0].Field != "due" {
		t.Fatalf("%d %+v", code, out)
	}
	n.post("/v1/targets", `{"url": "https://shop.test/c/m"}`, &out)
	var ex wire.Explanation
	resp, err = http.Get("http://" + n.addr + "/v1/targets?url=" + url.QueryEscape("https://shop.test/c/m"))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&ex)
	resp.Body.Close()
	if ex.Source != "discovered" || ex.Cadence.Seconds != 12*3600 {
		t.Fatalf("after a re-post without source: %+v", ex)
	}
}

// The bulk-import shape with the ready set disabled and nothing completed: 200 rows at one due
// ms are all granted across claims (paging on the due time alone granted 64, then nothing).
// Past the scan's bound of leased rows a claim says work is queued behind leases, not "empty".
func TestE2EIndexFallbackPagesPastLeasedRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	seedOneMs(t, dir, 1200)
	// Politeness is not what this tests: each host may have all its rows in flight, and the
	// lease table has room for their host slots too.
	n := startNode(t, dir, 1, "queue:\n  ready: {enabled: false}\n  max_remote_leases: 2000\n  max_leases: 8192\nrender:\n  hosts: {max_concurrency: 1024}\n", "")
	waitReady(t, n)
	held := map[string]bool{}
	for claims := 0; len(held) < 200; claims++ {
		var resp wire.RemoteClaimResponse
		if code := n.post("/v1/claim", `{"limit": 8, "renderer": "e2e"}`, &resp); code != 200 || len(resp.Jobs) == 0 || claims > 50 {
			t.Fatalf("claim %d after %d granted: %d %+v", claims, len(held), code, resp)
		}
		for _, j := range resp.Jobs {
			if held[string(j.Key)] {
				t.Fatalf("%s granted twice", j.Key)
			}
			held[string(j.Key)] = true
		}
	}
	for len(held) < 1150 {
		var resp wire.RemoteClaimResponse
		if code := n.post("/v1/claim", fmt.Sprintf(`{"limit": %d, "renderer": "e2e"}`, min(1000, 1150-len(held))), &resp); code != 200 || len(resp.Jobs) == 0 {
			t.Fatalf("after %d granted: %d %+v", len(held), code, resp)
		}
		for _, j := range resp.Jobs {
			held[string(j.Key)] = true
		}
	}
	var resp wire.RemoteClaimResponse
	if code := n.post("/v1/claim", `{"limit": 1, "renderer": "e2e"}`, &resp); code != 200 || len(resp.Jobs) != 0 || !resp.QueuedBehindLeases {
		t.Fatalf("50 rows behind 1,150 leased ones: %d %+v", code, resp)
	}
}

// A remote renderer leases for the TTL it asks for under its own name (explain shows it),
// extends and releases its leases, and holds at most queue.max_remote_leases of them.
func TestE2ERemoteLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	seedOneMs(t, dir, 20)
	n := startNode(t, dir, 1, "queue:\n  max_remote_leases: 5\nrender:\n  hosts: {max_concurrency: 1024}\n", "")
	waitReady(t, n)
	var c wire.RemoteClaimResponse
	if code := n.post("/v1/claim", `{"limit": 10, "lease": "3m", "renderer": "farm-1"}`, &c); code != 200 || len(c.Jobs) != 5 {
		t.Fatalf("claim: %d %d jobs", code, len(c.Jobs))
	}
	var ae struct{ Error, Field string }
	if code := n.post("/v1/claim", `{"limit": 1, "renderer": "farm-1"}`, &ae); code != 429 || ae.Error == "" {
		t.Fatalf("over the cap: %d %+v", code, ae)
	}
	j := c.Jobs[0]
	var ex wire.Explanation
	resp, err := http.Get("http://" + n.addr + "/v1/targets?url=" + url.QueryEscape(j.URL))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&ex)
	resp.Body.Close()
	if ex.Lease == nil || ex.Lease.HolderName != "remote:farm-1" || ex.Lease.ExpiresAt.Sub(ex.Lease.AcquiredAt) != 3*time.Minute {
		t.Fatalf("explain: %+v", ex.Lease)
	}
	var ext wire.LeaseResponse
	if code := n.post("/v1/leases/extend", wire.LeaseRequest{Key: j.Key, Lease: j.Lease, TTL: "5m"}, &ext); code != 200 {
		t.Fatalf("extend: %d", code)
	}
	if code := n.post("/v1/leases/extend", wire.LeaseRequest{Key: j.Key, Lease: wire.Lease{Slot: 1 << 31, KeyHash: j.KeyHash}}, &ae); code != 400 || ae.Field != "lease.slot" {
		t.Fatalf("a slot past the table: %d %+v", code, ae)
	}
	if code := n.post("/v1/leases/release", wire.LeaseRequest{Key: j.Key, Lease: ext.Lease}, nil); code != 200 {
		t.Fatalf("release: %d", code)
	}
	if code := n.post("/v1/leases/release", wire.LeaseRequest{Key: j.Key, Lease: ext.Lease}, &ae); code != 409 {
		t.Fatalf("release twice: %d %+v", code, ae)
	}
	if code := n.post("/v1/claim", `{"limit": 3, "renderer": "farm-1"}`, &c); code != 200 || len(c.Jobs) != 1 {
		t.Fatalf("after a release: %d %d jobs", code, len(c.Jobs))
	}
}
