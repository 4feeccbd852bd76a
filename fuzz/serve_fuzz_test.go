package fuzz

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/freshq/freshq/serve"
)

// FuzzServeTargetURL drives the crawler listener's URL-in-path parser with any request-target:
// it never panics; what it accepts is an absolute http(s) URL with a host and no user
// information, at most serve.MaxTargetLen bytes, which names itself again when sent as
// /{url}; what it refuses matches serve.ErrBadTarget.
func FuzzServeTargetURL(f *testing.F) {
	for _, s := range []string{
		"/https://shop.example/c/shoes?page=2", "/https%3A%2F%2Fshop.example%2Fc%3Fp%3D2", "/https:/shop.example/",
		"/render/https://a.test/x", "/render?url=https%3A%2F%2Fa.test", "/render?url=a&url=b", "/https://u:p@a.test/",
		"/http%3a%2f%2f%zz", "/https://[::1]:8080/p", "/https://a.test/%zz", "//", "/render", "/HTTP:/a.test",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := serve.TargetURL(in)
		if err != nil {
			if !errors.Is(err, serve.ErrBadTarget) {
				t.Fatalf("%q: error %v does not match ErrBadTarget", in, err)
			}
			return
		}
		l := strings.ToLower(got)
		if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
			t.Fatalf("%q: accepted %q, not http(s)", in, got)
		}
		u, perr := url.Parse(got)
		if perr != nil || u.Hostname() == "" || u.User != nil {
			t.Fatalf("%q: accepted %q: %v %+v", in, got, perr, u)
		}
		if len(got) > serve.MaxTargetLen {
			t.Fatalf("%q: accepted %d bytes", in, len(got))
		}
		if again, err := serve.TargetURL("/" + got); err == nil && again != got {
			t.Fatalf("%q: accepted %q, which names %q", in, got, again)
		}
	})
}
