package wire

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses Go duration syntax with an added "d" unit for days ("90s", "1h30m",
// "7d", "1d12h"): the syntax of every duration a client sends (an interval, a lease) and of
// the configuration file's.
func ParseDuration(s string) (time.Duration, error) {
	const day = 24 * time.Hour
	s = strings.TrimSpace(s)
	text := s
	var days int64
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || n > 100_000 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		days, s = n, s[i+1:]
		if s == "" {
			return time.Duration(days) * day, nil
		}
		// What follows the days adds to them: "1d-23h" would silently mean 1h.
		if s[0] < '0' || s[0] > '9' {
			return 0, fmt.Errorf("invalid duration %q: only digits may follow the days", text)
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", text)
	}
	return time.Duration(days)*day + d, nil
}
