//go:build !testclock

package crawlers

import "net"

// SystemResolver is the resolver verification asks: the system's. A production build reads no
// test switch (resolver_testclock.go has one).
func SystemResolver() Resolver { return net.DefaultResolver }
