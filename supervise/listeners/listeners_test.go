package listeners

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/freshq/freshq/config"
)

// An inherited socket must be on the address the configuration names: the token rule and the
// Host check judge the configured address. A socket on all addresses under a configuration
// that says loopback would otherwise expose a listener without a token.
func TestInheritedSocketMustBeOnTheConfiguredAddress(t *testing.T) {
	v4 := func(a [4]byte, port int) syscall.Sockaddr { return &syscall.SockaddrInet4{Addr: a, Port: port} }
	any6 := &syscall.SockaddrInet6{Port: 8420}
	for _, c := range []struct {
		want string
		sa   syscall.Sockaddr
		ok   bool
	}{
		{"127.0.0.1:8420", v4([4]byte{127, 0, 0, 1}, 8420), true},
		{"localhost:8420", v4([4]byte{127, 0, 0, 1}, 8420), true},
		{"0.0.0.0:8420", any6, true}, // ListenStream=8420 binds [::] for both families
		{":8420", v4([4]byte{}, 8420), true},
		{"127.0.0.1:8420", v4([4]byte{127, 0, 0, 1}, 8421), false},
		{"127.0.0.1:8420", v4([4]byte{}, 8420), false}, // all addresses, configured loopback
		{"127.0.0.1:8420", any6, false},
		{"10.1.2.3:8420", v4([4]byte{127, 0, 0, 1}, 8420), false},
	} {
		err := sameAddress(c.want, c.sa)
		if (err == nil) != c.ok {
			t.Errorf("%s against %v: %v, want ok=%v", c.want, c.sa, err, c.ok)
		}
	}
}

// A crawler socket inherited without serve.listen is refused, and so is one on another
// address: its connections would wait for a listener that never comes.
func TestInheritedCrawlerSocketNeedsServeListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := socketFile(ln, fdCrawler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := Inherited{files: map[string]*os.File{fdCrawler: f}, From: "systemd"}
	cfg := &config.Config{Listen: "127.0.0.1:8420"}
	if err := in.Check(cfg.Listen, cfg.Serve.Listen); err == nil || !strings.Contains(err.Error(), "serve.listen is not set") {
		t.Fatalf("without serve.listen: %v", err)
	}
	cfg.Serve.Listen = "127.0.0.1:1"
	if err := in.Check(cfg.Listen, cfg.Serve.Listen); err == nil || !strings.Contains(err.Error(), "not on 127.0.0.1:1") {
		t.Fatalf("on another address: %v", err)
	}
	cfg.Serve.Listen = ln.Addr().String()
	if err := in.Check(cfg.Listen, cfg.Serve.Listen); err != nil {
		t.Fatalf("on its address: %v", err)
	}
}

func TestWithoutEnv(t *testing.T) {
	got := withoutEnv([]string{"A=1", "LISTEN_FDS=2", "LISTEN_FDSX=3", "B=2"}, "LISTEN_FDS")
	if strings.Join(got, " ") != "A=1 LISTEN_FDSX=3 B=2" {
		t.Fatal(got)
	}
}
