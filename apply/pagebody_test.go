package apply

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// A rendered page of intake.CompressMin bytes or more is stored gzipped, marked content-encoding:
// gzip, and decodes back to the rendered bytes; a smaller one is stored as rendered.
func TestPagesAreStoredCompressed(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	big, small := []byte("desktop|https://a.test/c/big"), []byte("desktop|https://a.test/c/small")
	e.Put(string(big), start-hour, false, 0, store.Lanes{})
	e.Put(string(small), start-hour, false, 0, store.Lanes{})
	html := []byte("<!doctype html><title>big</title>" + strings.Repeat("<p>a product, a price</p>\n", 200))
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	res, err := a.Apply([]wire.Result{
		{Key: big, Outcome: "ok", Status: 200, Headers: map[string]string{"content-type": "text/html"}, Body: html, Lease: grant(t, e, big)},
		{Key: small, Outcome: "ok", Status: 200, Body: []byte("<p>small</p>"), Lease: grant(t, e, small)},
	})
	if err != nil || res.Applied != 2 {
		t.Fatalf("apply: %+v %v", res, err)
	}
	pg, err := e.Store.GetPage(big)
	if err != nil {
		t.Fatal(err)
	}
	if !intake.Gzipped(&pg) || len(pg.Body) >= len(html)/4 {
		t.Fatalf("stored %d bytes for %d, headers %v: want gzipped", len(pg.Body), len(html), pg.Headers)
	}
	if plain, err := intake.PlainBody(&pg); err != nil || !bytes.Equal(plain, html) {
		t.Fatalf("decoded: %d bytes, %v; want the rendered page", len(plain), err)
	}
	pg, err = e.Store.GetPage(small)
	if err != nil || intake.Gzipped(&pg) || string(pg.Body) != "<p>small</p>" {
		t.Fatalf("small page: %q %v %v; want it as rendered", pg.Body, pg.Headers, err)
	}
	bad := store.Page{Headers: []store.Header{{Name: "Content-Encoding", Value: "gzip"}}, Body: []byte("not gzip")}
	if _, err := intake.PlainBody(&bad); !errors.Is(err, intake.ErrBadStoredPage) {
		t.Fatalf("a gzipped body that does not decompress: %v, want intake.ErrBadStoredPage", err)
	}
}
