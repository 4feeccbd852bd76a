//go:build !testclock

package grantlog

// Open returns nil, nil: this is a production build, which keeps no grant log and reads no
// environment for one (open_testclock.go has the switch).
func Open(node string, shards int) (*Log, error) { return nil, nil }
