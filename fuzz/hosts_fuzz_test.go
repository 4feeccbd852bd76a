package fuzz

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/hosts"
)

// FuzzRetryAfter feeds arbitrary Retry-After values, at arbitrary times, to the parser worker 0
// reads every render's Retry-After with (the origin's header, or a remote renderer's result):
// never a panic, never a negative delay or one past hosts.MaxRetryAfter, and delta-seconds
// small enough to be exact are read exactly.
func FuzzRetryAfter(f *testing.F) {
	for _, v := range []string{"2", "0", " 120 ", "31536001", "99999999999999999999999999", "9223372036854775808", "-5", "+5", "1.5", "",
		"Tue, 01 Dec 2026 12:00:30 GMT", "Tuesday, 01-Dec-26 12:01:00 GMT", "Tue Dec  1 12:00:05 2026",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
		"Tue, 01 Dec 2026 12:0", "Tue, 01 De", "12\x00", "\xff\xfe"} { // cut mid-date, as a truncated header is
		f.Add(v, int64(1_796_126_400_000))
	}
	f.Add("Tue, 01 Dec 2026 12:00:30 GMT", int64(-1<<62))
	f.Add("Tue, 01 Dec 2026 12:00:30 GMT", int64(1<<62))
	f.Fuzz(func(t *testing.T, v string, nowMs int64) {
		d, ok := hosts.ParseRetryAfter(v, time.UnixMilli(nowMs))
		if d < 0 || d > hosts.MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside 0..%v", v, d, hosts.MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) refused it but returned %v", v, d)
		}
		s := strings.TrimSpace(v)
		if s == "" || strings.Trim(s, "0123456789") != "" {
			return
		}
		// Delta-seconds: exact below the cap, the cap above it, however many digits.
		want := hosts.MaxRetryAfter
		if n, err := strconv.ParseUint(s, 10, 32); err == nil {
			want = min(time.Duration(n)*time.Second, hosts.MaxRetryAfter)
		}
		if !ok || d != want {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v", v, d, ok, want)
		}
	})
}
