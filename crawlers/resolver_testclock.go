//go:build testclock

package crawlers

import (
	"context"
	"net"
	"os"
)

// TestDNSEnv names a DNS server (host:port, over UDP) that verification asks instead of the
// system's, so that an end-to-end test controls what a worker's lookups answer
// (testkit/testdns.Listen). Only this build, for the end-to-end tests (the tag testclock,
// testkit/testbin), reads it.
const TestDNSEnv = "FRESHQ_TEST_DNS"

// SystemResolver is the resolver verification asks: the system's, or TestDNSEnv's server.
func SystemResolver() Resolver {
	addr := os.Getenv(TestDNSEnv)
	if addr == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}
