package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/freshq/freshq/wire"
)

// readAll reads every item of an import file.
func readAll(t *testing.T, text, format string) ([]importItem, error) {
	t.Helper()
	ir, err := newItemReader(strings.NewReader(text), format)
	if err != nil {
		return nil, err
	}
	var out []importItem
	err = ir.each(func(it importItem) error {
		out = append(out, it)
		return nil
	})
	return out, err
}

func TestReadNDJSON(t *testing.T) {
	text := "\n\n{\"url\":\"https://a.test/1\",\"interval\":\"6h\"}\n   \n{\"url\":\"https://a.test/2\",\"device\":\"mobile\",\"due\":\"2026-11-30T12:00:00Z\"}\r\n" +
		"\"not json\"\n{\"url\":\"https://a.test/3\",\"colour\":\"red\"}\n{\"url\":\"https://a.test/4\",\"interval\":3600}"
	items, err := readAll(t, text, "ndjson")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 5 {
		t.Fatalf("%d items: %+v", len(items), items)
	}
	wantLines := []int{3, 5, 6, 7, 8}
	for i, it := range items {
		if it.loc != wantLines[i] {
			t.Errorf("item %d at line %d, want %d", i, it.loc, wantLines[i])
		}
	}
	if items[0].err != nil || string(items[0].item.Interval) != `"6h"` || items[1].item.Device != "mobile" || items[1].item.Due == "" {
		t.Fatalf("items %+v", items[:2])
	}
	if items[2].err == nil || items[3].err == nil || !strings.Contains(items[3].err.Error(), "colour") {
		t.Fatalf("bad lines not rejected: %v, %v", items[2].err, items[3].err)
	}
	if string(items[4].item.Interval) != "3600" {
		t.Fatalf("numeric interval %s", items[4].item.Interval)
	}
}

func TestReadJSONArray(t *testing.T) {
	items, err := readAll(t, ` [ {"url":"https://a.test/1"}, {"url":"https://a.test/2","source":"discovered"}, 7 ]`, "ndjson")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 || items[1].loc != 2 || items[1].item.Source != "discovered" || items[2].err == nil {
		t.Fatalf("items %+v", items)
	}
	if _, err := readAll(t, `[{"url":"https://a.test/1"}`, "ndjson"); err == nil {
		t.Fatal("an unterminated array read cleanly")
	}
}

func TestReadCSV(t *testing.T) {
	// Positional columns, no header: url,device,interval,source.
	items, err := readAll(t, "https://a.test/1\nhttps://a.test/2,mobile,6h,sitemap\n# a comment\n\nhttps://a.test/3,,3600\n\"https://a.test/4,x\",desktop\nhttps://a.test/5,desktop,6h,api,extra,more\n", "csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 5 {
		t.Fatalf("%d items: %+v", len(items), items)
	}
	if it := items[1]; it.loc != 2 || it.item.Device != "mobile" || string(it.item.Interval) != `"6h"` || it.item.Source != "sitemap" {
		t.Fatalf("row 2 %+v", it)
	}
	if it := items[2]; it.loc != 5 || it.item.Device != "" || string(it.item.Interval) != "3600" {
		t.Fatalf("row 5 %+v", it)
	}
	if items[3].item.URL != "https://a.test/4,x" {
		t.Fatalf("quoted field %q", items[3].item.URL)
	}
	if items[4].err == nil || items[4].loc != 7 {
		t.Fatalf("too many columns: %+v", items[4])
	}

	// A header names the columns, in any order.
	items, err = readAll(t, "source, URL ,interval,due\nsitemap,https://a.test/1,1d,2026-11-30T12:00:00Z\n", "csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].loc != 2 || items[0].item.URL != "https://a.test/1" || items[0].item.Source != "sitemap" || items[0].item.Due == "" {
		t.Fatalf("items %+v", items)
	}
	if _, err := readAll(t, "url,colour\nhttps://a.test/,red\n", "csv"); err == nil || !strings.Contains(err.Error(), `unknown column "colour"`) {
		t.Fatalf("unknown header column: %v", err)
	}
}

// targetsFake answers POST /v1/targets like the real server: it rejects items whose URL
// contains "bad" (field url) and records every chunk.
type targetsFake struct {
	mu     sync.Mutex
	chunks [][]wire.TargetItem
	fail   int // answer 413 to this chunk (1-based); 0: never
}

func (f *targetsFake) handler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var items []wire.TargetItem
	var resp wire.TargetsResponse
	for i, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		var it wire.TargetItem
		if err := json.Unmarshal(line, &it); err != nil {
			http.Error(w, "bad line", 500)
			return
		}
		items = append(items, it)
		if strings.Contains(it.URL, "bad") {
			resp.Rejected++
			resp.Errors = append(resp.Errors, wire.ItemError{Index: i, Field: "url", Error: "must be an absolute http(s) URL"})
		} else {
			resp.Accepted++
		}
	}
	f.mu.Lock()
	f.chunks = append(f.chunks, items)
	n := len(f.chunks)
	f.mu.Unlock()
	if n == f.fail {
		reply(413, `{"error":"body over 67108864 bytes; split the upload (0 items landed before the limit)"}`)(w, r)
		return
	}
	code := 200
	if resp.Accepted == 0 {
		code = 400
	}
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(resp)
}

func TestImport(t *testing.T) {
	tf := &targetsFake{}
	f := newFake(t, map[string]http.HandlerFunc{"POST /v1/targets": tf.handler})
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		switch i {
		case 4:
			b.WriteString("\"oops\"\n") // line 4: rejected locally
		case 7:
			fmt.Fprintf(&b, "{\"url\":\"https://shop.test/bad-%d\"}\n", i) // line 7: rejected by the server
		default:
			fmt.Fprintf(&b, "{\"url\":\"https://shop.test/%d\",\"interval\":\"6h\"}\n", i)
		}
	}
	path := filepath.Join(dir, "targets.ndjson")
	os.WriteFile(path, []byte(b.String()), 0o600)
	r := at(t, f.srv, "import", path, "--chunk", "3")
	wantExit(t, r, 1, "freshqctl: 2 of 10 items rejected")
	if len(tf.chunks) != 3 || len(tf.chunks[0]) != 3 || len(tf.chunks[2]) != 3 {
		t.Fatalf("chunks %v", tf.chunks)
	}
	for _, want := range []string{"10 items, 8 accepted, 2 rejected", "line 4: not a target object", "line 7: url: must be an absolute"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	fits(t, r.stdout)

	// --json: the summary as JSON, with line numbers.
	r = at(t, f.srv, "import", path, "--chunk", "3", "--json")
	var sum importSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("--json %q: %v", r.stdout, err)
	}
	if sum.Items != 10 || sum.Accepted != 8 || sum.Rejected != 2 || len(sum.Errors) != 2 || sum.Errors[1].Line != 7 || sum.Errors[1].Field != "url" {
		t.Fatalf("summary %+v", sum)
	}

	// All good from stdin, CSV, default chunk: one request, exit 0.
	tf.chunks = nil
	r = cli(t, map[string]string{"FRESHQ_SERVER": f.srv.URL}, "url,device,interval,source\nhttps://shop.test/a,mobile,6h,sitemap\nhttps://shop.test/b,,,\n", "import", "-", "--format", "csv")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "imported -: 2 items, 2 accepted, 0 rejected") || len(tf.chunks) != 1 {
		t.Fatalf("stdout %q, chunks %v", r.stdout, tf.chunks)
	}
	if it := tf.chunks[0][0]; it.Device != "mobile" || string(it.Interval) != `"6h"` || it.Source != "sitemap" {
		t.Fatalf("CSV item sent as %+v", it)
	}

	// A .csv file is read as CSV without --format.
	csvPath := filepath.Join(dir, "t.csv")
	os.WriteFile(csvPath, []byte("https://shop.test/c\n"), 0o600)
	wantExit(t, at(t, f.srv, "import", csvPath), 0, "")

	// A chunk the server refuses stops the import.
	tf.chunks, tf.fail = nil, 2
	r = at(t, f.srv, "import", path, "--chunk", "3")
	wantExit(t, r, 1, "import stopped: line 5: body over 67108864 bytes")
	if !strings.Contains(r.stderr, "(3 items accepted before it)") || !strings.Contains(r.stdout, "stopped importing") {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}

	// A missing file.
	wantExit(t, at(t, f.srv, "import", filepath.Join(dir, "nope.ndjson")), 1, "no such file")
}

func TestImportManyErrorsAreCapped(t *testing.T) {
	tf := &targetsFake{}
	f := newFake(t, map[string]http.HandlerFunc{"POST /v1/targets": tf.handler})
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "https://shop.test/bad-%d\n", i)
	}
	r := cli(t, map[string]string{"FRESHQ_SERVER": f.srv.URL}, b.String(), "import", "-", "--format", "csv", "--chunk", "7")
	wantExit(t, r, 1, "30 of 30 items rejected")
	if !strings.Contains(r.stdout, "… and 20 more rejected") || strings.Count(r.stdout, "\n") != 12 {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
}

func TestImportProgressBarOnTTY(t *testing.T) {
	tf := &targetsFake{}
	f := newFake(t, map[string]http.HandlerFunc{"POST /v1/targets": tf.handler})
	path := filepath.Join(t.TempDir(), "t.csv")
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "https://shop.test/%d\n", i)
	}
	os.WriteFile(path, []byte(b.String()), 0o600)
	var out, errb strings.Builder
	code := run(t.Context(), []string{"--server", f.srv.URL, "import", path, "--chunk", "10"}, nil, &out, &errb, func(string) string { return "" }, terminals{stdout: true, stderr: true})
	if code != 0 || !strings.Contains(errb.String(), "importing [") || !strings.Contains(errb.String(), "100%") {
		t.Fatalf("exit %d stderr %q", code, errb.String())
	}
	if !strings.HasSuffix(errb.String(), "\r") {
		t.Fatalf("the bar is not cleared: %q", errb.String())
	}
}

func TestProgressBarLine(t *testing.T) {
	p := newProgressBar(io.Discard, "importing", 1000)
	if l := p.line(500, 123456, 7, 2e9); l != "importing [##########..........]  50%  123456 items  61728/s  7 rejected" {
		t.Fatalf("%q", l)
	}
	p = newProgressBar(io.Discard, "importing", 0)
	if l := p.line(500, 10, 0, 0); l != "importing  10 items" {
		t.Fatalf("%q", l)
	}
}

func TestIntervalJSON(t *testing.T) {
	for in, want := range map[string]string{"6h": `"6h"`, "3600": "3600", " 90 ": "90", "": "", "1d12h": `"1d12h"`} {
		if got := string(intervalJSON(in)); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
	var ue *usageError
	if _, err := newItemReader(strings.NewReader(""), "xml"); !errors.As(err, &ue) {
		t.Fatalf("unknown format: %v", err)
	}
}

// TestImportReadsLikeTheServer feeds the same bytes to the import's reader and to the decoder
// of POST /v1/targets: every item is accepted or refused alike, and a body the server stops
// reading stops the import at the same item, named by its line.
func TestImportReadsLikeTheServer(t *testing.T) {
	big := `{"url":"https://a.test/` + strings.Repeat("x", wire.MaxTargetItem) + `"}`
	for _, tc := range []struct {
		name, body string
		lines      []int  // where each item is
		stop       string // the error the reading stops with, "" for none
	}{
		{"garbage after ]", `[{"url":"https://a.test/1"},{"url":"https://a.test/2"}] x`, []int{1, 2}, `item 3: 'x' after the closing ]`},
		{"item over the bound", "{\"url\":\"https://a.test/1\"}\n" + big + "\n{\"url\":\"https://a.test/3\"}", []int{1, 2, 3}, ""},
		{"pretty-printed object", "\n{\n  \"url\": \"https://a.test/1\",\n  \"device\": \"mobile\"\n}\n", []int{2}, ""},
		{"two bare words", "{\"url\":\"https://a.test/1\"}\nnot json\n", []int{1, 2, 2}, ""},
		{"two objects on a line", `{"url":"https://a.test/1","x":1} {"url":"https://a.test/2"}`, []int{1, 1}, ""},
		{"unclosed object", "{\"url\":\"https://a.test/1\"}\n\n{\"url\":\"https://a.test/2\"}\n{oops\n{\"url\":\"https://a.test/4\"}\n", []int{1, 3}, "line 4: truncated: the body ends inside an item"},
		{"stray bracket", "{\"url\":\"https://a.test/1\"}\n}\n{\"url\":\"https://a.test/3\"}\n", []int{1}, `line 2: unexpected '}'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var server []bool // the server's verdict on each item: accepted?
			serr := wire.DecodeTargetItems(strings.NewReader(tc.body), func(_ int, it *wire.TargetItem, err error) error {
				server = append(server, err == nil && it != nil)
				return nil
			})
			items, err := readAll(t, tc.body, "ndjson")
			if len(items) != len(server) || len(items) != len(tc.lines) {
				t.Fatalf("%d items read, the server reads %d, want %d", len(items), len(server), len(tc.lines))
			}
			for i, it := range items {
				if (it.err == nil) != server[i] || it.loc != tc.lines[i] {
					t.Errorf("item %d: accepted %v at %d; the server: accepted %v, want at %d", i, it.err == nil, it.loc, server[i], tc.lines[i])
				}
			}
			if (err == nil) != (serr == nil) || err != nil && err.Error() != tc.stop || err == nil && tc.stop != "" {
				t.Fatalf("reading stops with %v, the server with %v, want %q", err, serr, tc.stop)
			}
		})
	}
}

// TestImportStopsWhereTheServerWould: a file that breaks is imported up to the break, as the
// server would take it, and the import names the line; an object laid out over several lines
// is one item.
func TestImportStopsWhereTheServerWould(t *testing.T) {
	tf := &targetsFake{}
	f := newFake(t, map[string]http.HandlerFunc{"POST /v1/targets": tf.handler})
	env := map[string]string{"FRESHQ_SERVER": f.srv.URL}
	r := cli(t, env, "{\"url\":\"https://shop.test/1\"}\n{\"url\":\"https://shop.test/2\"}\n{oops\n{\"url\":\"https://shop.test/4\"}\n", "import", "-")
	wantExit(t, r, 1, "import stopped: reading -: line 3: truncated: the body ends inside an item (2 items accepted before it)")
	if len(tf.chunks) != 1 || len(tf.chunks[0]) != 2 {
		t.Fatalf("chunks %v", tf.chunks)
	}

	tf.chunks = nil
	r = cli(t, env, "{\n  \"url\": \"https://shop.test/p\",\n  \"device\": \"mobile\"\n}\n", "import", "-")
	wantExit(t, r, 0, "")
	if len(tf.chunks) != 1 || len(tf.chunks[0]) != 1 || tf.chunks[0][0].Device != "mobile" || !strings.Contains(r.stdout, "1 item, 1 accepted") {
		t.Fatalf("stdout %q chunks %v", r.stdout, tf.chunks)
	}
}
