package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// documentedEndpoint is a row of docs/API.md's endpoint table: "| `METHOD /path?query` | …".
var documentedEndpoint = regexp.MustCompile("(?m)^\\| `(GET|POST|PUT|DELETE|HEAD) (/[^` ?]*)[^`]*` \\|")

// Every endpoint docs/API.md lists answers on the admin listener of the real supervisor: each is
// routed to a handler of its own, which answers in JSON or its own format, never the router's
// "404 page not found" or "405 Method Not Allowed" for a path or method nothing serves. The
// table is read from the file, so an endpoint documented and not built fails here.
func TestEndToEndEveryDocumentedEndpointAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := documentedEndpoint.FindAllStringSubmatch(string(doc), -1)
	if len(rows) < 20 {
		t.Fatalf("docs/API.md lists %d endpoints: the table's form changed, fix this test's pattern", len(rows))
	}
	n := startNode(t, t.TempDir(), 1, "", "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	for _, row := range rows {
		method, path := row[1], strings.ReplaceAll(row[2], "{id}", "0123456789abcdef")
		req, err := http.NewRequest(method, "http://"+n.addr+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		body := strings.TrimSpace(string(b))
		if body == "404 page not found" || resp.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("%s %s (docs/API.md): %d %q: nothing serves it", method, path, resp.StatusCode, body)
		}
	}
	t.Logf("%d documented endpoints asked", len(rows))
}
