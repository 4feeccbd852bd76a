//go:build !testclock

package testhold

// Hold does nothing: this is a production build.
func Hold() {}
