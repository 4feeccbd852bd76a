package api

import (
	"strings"
	"testing"
)

// POST /recache, the hosted prerender service's call, rushes what it names (filing an unknown
// URL first), in both of its shapes, for every device when it names none; a bad URL is refused
// naming it, and then nothing is rushed.
func TestRecacheRushesTheURLs(t *testing.T) {
	n := newOpNode(t)
	code, out := n.post("/recache", `{"prerenderToken":"x","url":"https://a.test/c/1"}`)
	if code != 200 || out["rushed"] != 2.0 {
		t.Fatalf("url: %d %v, want desktop and mobile rushed", code, out)
	}
	code, out = n.post("/recache", `{"prerenderToken":"x","urls":["https://a.test/c/1","https://a.test/c/2"]}`)
	if code != 200 || out["rushed"] != 4.0 {
		t.Fatalf("urls: %d %v, want two URLs rushed for desktop and mobile", code, out)
	}
	for _, k := range []string{"desktop|https://a.test/c/1", "desktop|https://a.test/c/2", "mobile|https://a.test/c/1", "mobile|https://a.test/c/2"} {
		row, err := n.Store.GetSchedule([]byte(k))
		if err != nil || !row.Lanes.Urgent {
			t.Fatalf("%s not rushed: %+v %v", k, row, err)
		}
	}
	code, out = n.post("/recache", `{"urls":["https://a.test/c/3","javascript:alert(1)"]}`)
	if code != 400 || out["field"] != "urls[1]" {
		t.Fatalf("bad url: %d %v", code, out)
	}
	for _, k := range []string{"desktop|https://a.test/c/3", "mobile|https://a.test/c/3"} {
		if _, err := n.Store.GetSchedule([]byte(k)); err == nil {
			t.Fatalf("a refused recache filed its first URL (%s)", k)
		}
	}
	code, out = n.post("/recache", `{"url":"https://a.test/c/4","device":"mobile"}`)
	if code != 200 || out["rushed"] != 1.0 {
		t.Fatalf("a recache naming mobile: %d %v, want that device alone", code, out)
	}
	if _, err := n.Store.GetSchedule([]byte("desktop|https://a.test/c/4")); err == nil {
		t.Fatal("a recache naming mobile filed desktop too")
	}
	for body, field := range map[string]string{`{}`: "url", `{"url":"https://a.test/","urls":["https://a.test/"]}`: "url",
		`{"urls":[` + strings.Repeat(`"https://a.test/",`, 1000) + `"https://a.test/"]}`: "urls"} {
		if code, out := n.post("/recache", body); code != 400 || out["field"] != field {
			t.Errorf("%.40s: %d %v", body, code, out)
		}
	}
}
