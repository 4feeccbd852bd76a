package chrome

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// A same-site fetch whose answer's headers say it is a stream that never ends by design
// (Content-Type text/event-stream, multipart/x-mixed-replace) is a long-poll as soon as those
// headers arrive: it holds the page no longer, without render.chrome.data_wait spent to learn it,
// on the first render of the site. It is still reported pending (the verdict judges that), and
// the page's other data requests are still waited for: the page is ready once its data answered.
func TestStreamingAnswerDoesNotHold(t *testing.T) {
	s := newSite(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	stream := func(contentType, first string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write([]byte(first))
			w.(http.Flusher).Flush()
			select { // the stream stays open: the origin sends no end
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}
	s.mux.HandleFunc("/api/events", stream("text/event-stream; charset=utf-8", "data: live\n\n"))
	s.mux.HandleFunc("/api/camera", stream("multipart/x-mixed-replace; boundary=frame", "--frame\r\nContent-Type: text/plain\r\n\r\nlive\r\n"))
	s.mux.HandleFunc("/api/product/7", delayed(300*time.Millisecond, hang, "Blue kettle, 20 EUR"))
	for _, p := range []string{"events", "camera"} {
		s.page("/"+p, `<!doctype html><html><body><div id=app>Loading…</div><script>
fetch("/api/`+p+`?since=1").then(r => r.body.getReader().read()).catch(() => {});
fetch("/api/product/7").then(r => r.text()).then(t => { document.getElementById("app").textContent = t })</script></body></html>`)
	}
	// data_wait long, so that a wait of it cannot be mistaken for the settle after the product.
	const dataWait = 15 * time.Second
	r := newRenderer(t, func(c *Options) {
		c.Timeout = 40 * time.Second
		c.LongRequest = 2 * time.Second
		c.DataWait = dataWait
	})
	for _, p := range []string{"events", "camera"} {
		res := render1(t, r, render.Request{URL: s.url("/" + p)})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Blue kettle, 20 EUR") {
			t.Fatalf("/%s: %v %s: %.300s", p, res.Outcome, res.Err, res.Body)
		}
		if res.Signals == nil || res.Signals.PendingRequests != 1 || !evidenceHas(res.Signals, "/api/"+p) {
			t.Errorf("/%s: signals %+v, want the stream pending", p, res.Signals)
		}
		if wait := res.Timings.Ready - res.Timings.Load; wait >= dataWait-300*time.Millisecond {
			t.Errorf("/%s: ready %s after the load event: the stream held the page until render.chrome.data_wait (%s)", p, wait, dataWait)
		}
	}
}
