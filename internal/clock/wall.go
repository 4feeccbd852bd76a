//go:build !testclock

package clock

import "time"

// TestClock reports whether this build honours the offset file named by EnvFile. It is false:
// this is the production build.
const TestClock = false

// NowMs is the wall clock in ms since the epoch.
func NowMs() int64 { return time.Now().UnixMilli() }
