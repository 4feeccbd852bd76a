package serve

import (
	"errors"
	"testing"
)

func TestTargetURL(t *testing.T) {
	for in, want := range map[string]string{
		"/https://shop.example/c/shoes?page=2":                 "https://shop.example/c/shoes?page=2",
		"/http://shop.example":                                 "http://shop.example",
		"/https%3A%2F%2Fshop.example%2Fc%3Fpage%3D2%26a%3Db":   "https://shop.example/c?page=2&a=b",
		"/HTTPS%3a%2f%2fshop.example%2Fc":                      "HTTPS://shop.example/c",
		"/https:%2F%2Fshop.example%2Fc%3Fx=1":                  "https://shop.example/c?x=1",
		"/https:/shop.example/c?x=1":                           "https://shop.example/c?x=1",
		"/render/https://shop.example/c?x=1":                   "https://shop.example/c?x=1",
		"/render/https%3A%2F%2Fshop.example%2Fc":               "https://shop.example/c",
		"/render?url=https%3A%2F%2Fshop.example%2Fc%3Fx%3D1":   "https://shop.example/c?x=1",
		"/render?url=https://shop.example/c&other=1":           "https://shop.example/c",
		"/https://shop.example/a%20b?q=%E2%9C%93":              "https://shop.example/a%20b?q=%E2%9C%93",
		"/https://shop.example:8443/render?url=https://x.test": "https://shop.example:8443/render?url=https://x.test",
	} {
		got, err := TargetURL(in)
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "*", "https://shop.example/", "/", "/render", "/render/", "/render?url=", "/render?url=a&url=b",
		"/shop.example/p", "/ftp://shop.example/", "/https://", "/https:///p", "/https://:80/p",
		"/https://u:p@shop.example/", "/https%3A%2F%2F%zz", "/https://shop.example/%zz", "/render?url=%zz",
		"/" + string(make([]byte, MaxTargetLen)),
	} {
		if got, err := TargetURL(in); !errors.Is(err, ErrBadTarget) {
			t.Errorf("%q: %q %v, want ErrBadTarget", in, got, err)
		}
	}
}
