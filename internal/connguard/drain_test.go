package connguard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A drain leaves an idle keep-alive connection open for its client's next request, answers it
// with Connection: close, and only then is done: the client never finds its connection closed
// under a request (http.Server.Shutdown alone closes it at once).
func TestDrainAnswersTheNextRequestOnAnIdleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var d Drain
	srv := &http.Server{ConnState: d.ConnState, Handler: d.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "page")
	}))}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(d.Listener(ln)) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	get := func() *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("no answer on the kept-alive connection: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "page" {
			t.Fatalf("body %q", b)
		}
		return resp
	}
	if resp := get(); resp.Close {
		t.Fatal("the first answer closes the connection before any drain")
	}
	waitOpen := func(n int) {
		for i := 0; d.Open() != n; i++ {
			if i > 500 {
				t.Fatalf("%d connections open, want %d", d.Open(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitOpen(1)

	stopped := make(chan struct{})
	go func() { d.Stop(srv, time.Minute, 5*time.Second); close(stopped) }()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v, want http.ErrServerClosed", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("the listener still accepts during the drain")
	}
	select {
	case <-stopped:
		t.Fatal("the drain ended with a connection open, before its grace")
	default:
	}
	resp := get()    // the connection is still there: the request sent on it is answered
	if !resp.Close { // Connection: close (ReadResponse takes the header out into Close)
		t.Fatalf("an answer during the drain keeps the connection: %v", resp.Header)
	}
	<-stopped // the server closed it after the answer: the drain ends without its grace
}
