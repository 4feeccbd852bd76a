package config

import (
	"errors"
	"strings"
	"testing"
)

// queue.ready.sitemap_boost is submitted_boost's earlier name: a file that sets it still loads,
// with the same value, and its errors keep their lines; setting both names is refused.
func TestSitemapBoostIsAnAliasOfSubmittedBoost(t *testing.T) {
	c, err := Parse([]byte("queue:\n  ready:\n    sitemap_boost: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Queue.Ready.SubmittedBoost != 3 {
		t.Fatalf("submitted_boost %v, want 3 from sitemap_boost", c.Queue.Ready.SubmittedBoost)
	}
	if c, err = Parse([]byte("queue: {ready: {capacity: 10, sitemap_boost: 4}}\n")); err != nil || c.Queue.Ready.SubmittedBoost != 4 {
		t.Fatalf("flow style: %v, %v", c, err)
	}
	_, err = Parse([]byte("queue:\n  ready:\n\n    sitemap_boost: 500\n"))
	var fe FieldErrors
	if !errors.As(err, &fe) || len(fe) == 0 || fe[0].Path != "queue.ready.submitted_boost" || fe[0].Line != 4 {
		t.Fatalf("out of range under the earlier name: %v; want queue.ready.submitted_boost at line 4", err)
	}
	_, err = Parse([]byte("queue:\n  ready:\n    submitted_boost: 3\n    sitemap_boost: 3\n"))
	var one *FieldError
	if !errors.As(err, &one) || one.Path != "queue.ready.sitemap_boost" || one.Line != 4 || !strings.Contains(one.Msg, "submitted_boost") {
		t.Fatalf("both names: %v", err)
	}
}
