package hosts

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"2", 2 * time.Second, true},
		{"0", 0, true},
		{" 120 ", 2 * time.Minute, true},
		{"007", 7 * time.Second, true},
		{"31536000", MaxRetryAfter, true},
		{"31536001", MaxRetryAfter, true},
		{"99999999999999999999999999999999", MaxRetryAfter, true}, // would overflow int64 and Duration
		{"9223372036854775808", MaxRetryAfter, true},              // 2^63: wraps to a negative int64
		{"18446744073709551616", MaxRetryAfter, true},             // 2^64: wraps to 0
		{"Tue, 01 Dec 2026 12:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Tuesday, 01-Dec-26 12:01:00 GMT", time.Minute, true},    // RFC 850
		{"Tue Dec  1 12:00:05 2026", 5 * time.Second, true},       // asctime
		{"Tue, 01 Dec 2026 11:00:00 GMT", 0, true},                // passed: no wait
		{"Fri, 31 Dec 9999 23:59:59 GMT", MaxRetryAfter, true},
		{"", 0, false},
		{"   ", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"5 6", 0, false},
		{"soon", 0, false},
		{"Tue, 01 Dec 2026 12:00:30", 0, false}, // no zone
		{"٣", 0, false},                         // not an ASCII digit
	} {
		got, ok := ParseRetryAfter(c.v, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.v, got, ok, c.want, c.ok)
		}
	}
}
