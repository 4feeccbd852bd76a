package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The grant log (FRESHQ_TEST_GRANT_LOG) is what the cluster tests check ownership from, rather
// than from the lease table alone: every process of every node appends one line per event,
//
//	<unix_ns> grant   <node_id> <shard> <cache_key>   a render worker or worker 0 granted a row
//	<unix_ns> acquire <node_id> <shard> <epoch>       worker 0 committed an acquire of the shard
//	<unix_ns> release <node_id> <shard> <epoch>       worker 0 hands the shard over
//	<unix_ns> lost    <node_id> <shard> <epoch>       worker 0 found the lease gone
//
// The processes write concurrently (O_APPEND, one write per line), so the file is in no
// particular order; a reader sorts by time.

// grantEvent is one line of a grant log.
type grantEvent struct {
	ns    int64
	kind  string // grant, acquire, release, lost
	node  string
	shard int
	epoch int64  // acquire, release, lost
	key   string // grant
	line  int    // 1-based, in the file as written: keeps events of one nanosecond in file order
}

func (e grantEvent) String() string {
	if e.kind == "grant" {
		return fmt.Sprintf("%d grant %s %d %s (line %d)", e.ns, e.node, e.shard, e.key, e.line)
	}
	return fmt.Sprintf("%d %s %s %d %d (line %d)", e.ns, e.kind, e.node, e.shard, e.epoch, e.line)
}

// parseGrantLog reads a grant log and returns its events sorted by time. A line that is not of
// the format is an error: a torn or interleaved write would otherwise hide a grant.
func parseGrantLog(r io.Reader) ([]grantEvent, error) {
	var evs []grantEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 5 {
			return nil, fmt.Errorf("grant log line %d: %d fields, want 5: %q", n, len(f), sc.Text())
		}
		ns, err1 := strconv.ParseInt(f[0], 10, 64)
		shard, err2 := strconv.Atoi(f[3])
		if err := cmp.Or(err1, err2); err != nil {
			return nil, fmt.Errorf("grant log line %d: %q: %w", n, sc.Text(), err)
		}
		ev := grantEvent{ns: ns, kind: f[1], node: f[2], shard: shard, line: n}
		switch ev.kind {
		case "grant":
			ev.key = f[4]
		case "acquire", "release", "lost":
			if ev.epoch, err1 = strconv.ParseInt(f[4], 10, 64); err1 != nil {
				return nil, fmt.Errorf("grant log line %d: %q: %w", n, sc.Text(), err1)
			}
		default:
			return nil, fmt.Errorf("grant log line %d: unknown event %q", n, ev.kind)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the grant log: %w", err)
	}
	slices.SortStableFunc(evs, func(a, b grantEvent) int { return cmp.Compare(a.ns, b.ns) })
	return evs, nil
}

// readGrantLog is parseGrantLog of a file.
func readGrantLog(path string) ([]grantEvent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the grant log: %w", err)
	}
	return parseGrantLog(bytes.NewReader(b))
}

// checkGrantLog checks that no shard was granted by two nodes at once. The epoch of a grant
// (t, X, s) is X's last acquire of s before t. Per shard, in time order, the epochs of grants
// never decrease, and each epoch is one node's (two nodes never acquire one epoch of a shard).
// A grant with no acquire of its shard by its node before it is a violation too. So once a
// node granted under epoch e, a grant under an older epoch (a node that lost the shard and
// granted on) fails the check, whichever node it came from.
//
// It checks this by a stricter rule, which implies the first: a grant's epoch must be the
// shard's last acquired epoch, by any node, at the grant's time. A grant's time is taken before the fence check that lets it
// through, an acquire is logged after it committed, and a node stops granting a shard (fence
// bumped, or grantUntil passed) before its lease can be released or expire, so a grant by the
// old owner always precedes the new owner's acquire in the log; one after it, even before the
// new owner granted anything, is two nodes holding the shard at once.
//
// It returns every violation, in time order (nil when there is none), one per event.
func checkGrantLog(evs []grantEvent) []string {
	type nodeShard struct {
		node  string
		shard int
	}
	type epochOf struct {
		shard int
		epoch int64
	}
	lastAcquire := map[nodeShard]int64{}  // the node's last acquire of the shard
	epochOwner := map[epochOf]string{}    // which node acquired the shard at that epoch
	lastAcquireOf := map[int]grantEvent{} // per shard, the last acquire by any node
	var bad []string
	for _, ev := range evs {
		switch ev.kind {
		case "acquire":
			if prev, ok := epochOwner[epochOf{ev.shard, ev.epoch}]; ok && prev != ev.node {
				bad = append(bad, fmt.Sprintf("shard %d epoch %d acquired by %s and by %s: %v", ev.shard, ev.epoch, prev, ev.node, ev))
			}
			epochOwner[epochOf{ev.shard, ev.epoch}] = ev.node
			lastAcquire[nodeShard{ev.node, ev.shard}] = ev.epoch
			if last, ok := lastAcquireOf[ev.shard]; !ok || ev.epoch >= last.epoch {
				lastAcquireOf[ev.shard] = ev
			}
		case "grant":
			e, ok := lastAcquire[nodeShard{ev.node, ev.shard}]
			if !ok {
				bad = append(bad, fmt.Sprintf("grant with no acquire of its shard by its node before it: %v", ev))
				continue
			}
			if last := lastAcquireOf[ev.shard]; e < last.epoch {
				bad = append(bad, fmt.Sprintf("shard %d granted by %s under epoch %d after %v: %v", ev.shard, ev.node, e, last, ev))
			}
		}
	}
	return bad
}

// staleGrants are the grants by node after the time since (unix ns) of a shard in lost (the
// shards it lost, each with the epoch it held) that it had not acquired again by then: the
// grants a node that lost a shard must never make.
func staleGrants(evs []grantEvent, node string, since int64, lost map[int]int64) []grantEvent {
	held := map[int]int64{}
	var out []grantEvent
	for _, ev := range evs {
		if ev.node != node {
			continue
		}
		switch ev.kind {
		case "acquire":
			held[ev.shard] = ev.epoch
		case "grant":
			old, wasLost := lost[ev.shard]
			if ev.ns > since && wasLost && held[ev.shard] <= old {
				out = append(out, ev)
			}
		}
	}
	return out
}

func TestClusterGrantLogCheck(t *testing.T) {
	cases := []struct {
		name string
		log  string
		bad  int // violations expected
	}{
		{"clean handover", `
100 acquire node-a 7 1
110 grant node-a 7 desktop|https://a.test/c/1
120 grant node-a 7 desktop|https://a.test/c/2
130 release node-a 7 1
140 acquire node-b 7 2
150 grant node-b 7 desktop|https://a.test/c/3
`, 0},
		{"moved back under a new epoch", `
100 acquire node-a 7 1
110 grant node-a 7 k1
130 lost node-a 7 1
140 acquire node-b 7 2
150 grant node-b 7 k2
160 release node-b 7 2
170 acquire node-a 7 3
180 grant node-a 7 k3
`, 0},
		{"A, B, A under increasing epochs", `
100 acquire node-a 7 1
110 grant node-a 7 k1
140 acquire node-b 7 2
150 grant node-b 7 k2
160 grant node-a 7 k3
`, 1},
		{"a stale grant after the new owner's acquire, before its first grant", `
100 acquire node-a 7 1
110 grant node-a 7 k1
140 acquire node-b 7 2
160 grant node-a 7 k3
170 grant node-b 7 k2
`, 1},
		{"the stale grant written first in the file", `
160 grant node-a 7 k3
100 acquire node-a 7 1
150 grant node-b 7 k2
140 acquire node-b 7 2
`, 1},
		{"a grant with no acquire", `
100 acquire node-a 7 1
110 grant node-b 7 k1
`, 1},
		{"a grant before its node's acquire", `
110 grant node-a 7 k1
120 acquire node-a 7 1
`, 1},
		{"one epoch acquired by two nodes", `
100 acquire node-a 7 1
110 acquire node-b 7 1
120 grant node-a 7 k1
130 grant node-b 7 k2
`, 1},
		{"other shards are independent", `
100 acquire node-a 7 1
100 acquire node-b 8 5
110 grant node-b 8 k1
120 grant node-a 7 k2
`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, err := parseGrantLog(strings.NewReader(strings.TrimSpace(c.log)))
			if err != nil {
				t.Fatal(err)
			}
			if bad := checkGrantLog(evs); len(bad) != c.bad {
				t.Fatalf("%d violations, want %d: %q", len(bad), c.bad, bad)
			}
		})
	}
	for _, torn := range []string{"100 grant node-a 7", "100 grant node-a 7 k1 110 grant", "x grant node-a 7 k", "100 take node-a 7 k", "100 acquire node-a 7 x"} {
		if _, err := parseGrantLog(strings.NewReader(torn)); err == nil {
			t.Errorf("%q parsed", torn)
		}
	}
}

func TestClusterGrantLogStaleGrants(t *testing.T) {
	evs, err := parseGrantLog(strings.NewReader(strings.TrimSpace(`
100 acquire node-c 7 1
100 acquire node-c 9 1
110 grant node-c 7 k1
200 acquire node-a 7 2
300 grant node-c 7 k2
310 grant node-c 9 k3
400 acquire node-c 7 3
410 grant node-c 7 k4`)))
	if err != nil {
		t.Fatal(err)
	}
	// node-c lost shard 7 (epoch 1) while paused, resumed at 250: its grant of k2 is stale, its
	// grant of shard 9 (not lost) and of shard 7 after it took it back (epoch 3) are not.
	got := staleGrants(evs, "node-c", 250, map[int]int64{7: 1})
	if len(got) != 1 || got[0].key != "k2" {
		t.Fatalf("stale grants %v, want k2's", got)
	}
}
