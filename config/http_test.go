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
