package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHTTPDefaultsAndLimits(t *testing.T) {
	h := Default().HTTP
	if h.MaxConns != 512 || h.ReadHeaderTimeout.D() != 10*time.Second || h.ReadTimeout.D() != time.Minute ||
		h.WriteTimeout.D() != time.Minute || h.BulkTimeout.D() != 10*time.Minute || h.IdleTimeout.D() != 2*time.Minute || len(h.Hosts) != 0 {
		t.Fatalf("defaults %+v", h)
	}
	for yaml, path := range map[string]string{
		"http: {max_conns: -1}":                               "http.max_conns",
		"http: {read_header_timeout: 2m}":                     "http.read_header_timeout",
		"http: {bulk_timeout: 30s}":                           "http.bulk_timeout",
		"http: {idle_timeout: -1s}":                           "http.idle_timeout",
		"http: {hosts: [\"https://freshq.internal\"]}":        "http.hosts[0]",
		"http: {hosts: [freshq.internal, \"*.example.com\"]}": "http.hosts[1]",
	} {
		_, err := Parse([]byte(yaml + "\n"))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Path != path {
			t.Errorf("%s: %v, want an error at %s", yaml, err, path)
		}
	}
	c, err := Parse([]byte("http: {hosts: [freshq.internal, 10.0.0.5], read_header_timeout: 200ms, max_conns: 4}\n"))
	if err != nil || strings.Join(c.HTTP.Hosts, ",") != "freshq.internal,10.0.0.5" || c.HTTP.MaxConns != 4 {
		t.Fatalf("%+v %v", c, err)
	}
}

// The listener's bounds are set when it starts: a reload that changes one is refused, naming
// it; http.hosts and http.bulk_timeout are read per request and reload.
func TestHTTPReloadKeys(t *testing.T) {
	running := Default()
	for yaml, path := range map[string]string{
		"http: {max_conns: 10}\n":           "http.max_conns",
		"http: {read_header_timeout: 5s}\n": "http.read_header_timeout",
		"http: {read_timeout: 2m}\n":        "http.read_timeout",
		"http: {write_timeout: 2m}\n":       "http.write_timeout",
		"http: {idle_timeout: 1m}\n":        "http.idle_timeout",
		"http: {hosts: [a.test]}\n":         "",
		"http: {bulk_timeout: 20m}\n":       "",
	} {
		next, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckReload(running, next, []byte(yaml))
		var fe *FieldError
		if path == "" && err != nil || path != "" && (!errors.As(err, &fe) || fe.Path != path || fe.Line != 1) {
			t.Errorf("%s: %v, want a refusal at %q", yaml, err, path)
		}
	}
}
