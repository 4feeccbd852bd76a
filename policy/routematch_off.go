//go:build !testclock

package policy

// countRouteMatch counts a route match in a test build (routematch_testclock.go) only.
func countRouteMatch() {}
