package main

import (
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
	"github.com/freshq/freshq/wire"
)

func runCluster(a *app, args []string) error {
	fs := a.newFlags("cluster")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	var v wire.ClusterView
	raw, err := a.getJSON(wire.PathCluster, nil, &v)
	if err != nil {
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	printCluster(a, &v)
	return nil
}

// printCluster prints the nodes, then each owner's shards as runs of consecutive shards with
// their epochs and floors. Ages are read against the database's clock (v.NowMs), which stamped
// every heartbeat and lease, not against this machine's.
func printCluster(a *app, v *wire.ClusterView) {
	now := msTime(v.NowMs)
	since := func(ms int64) string {
		if ms <= 0 {
			return "-"
		}
		d := now.Sub(msTime(ms)).Round(time.Second)
		if d < 0 {
			return "in " + clitext.Duration(-d)
		}
		return clitext.Duration(d) + " ago"
	}
	fmt.Fprintf(a.stdout, "cluster seen from %s at %s (the database's clock)\n\n", v.Self, stamp(now))
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDR\tLIVE\tHEARTBEAT\tSTARTED\tSHARDS")
	for _, n := range v.Nodes {
		live := "NO"
		if n.Live {
			live = "yes"
		}
		if n.Stopping {
			live += ", stopping"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", n.ID, n.Addr, live, since(n.HeartbeatAtMs), since(n.StartedAtMs), n.Shards)
	}
	tw.Flush()

	groups := groupShards(v)
	nobody, expired, below := 0, 0, 0
	for _, g := range groups {
		for _, r := range g.runs {
			switch {
			case g.owner == "":
				nobody += r.count
			case g.expired:
				expired += r.count
			}
			below += r.below
		}
	}
	fmt.Fprintf(a.stdout, "\n%s (lease TTL %s): %d with nobody, %s expired, %s below floor\n", plural(len(v.Shards), "shard"),
		clitext.Duration(time.Duration(v.LeaseTTLMs)*time.Millisecond), nobody, plural(expired, "lease"), plural(below, "row"))
	if below > 0 {
		fmt.Fprintln(a.stdout, "rows below their shard's floor are never rendered: anything but 0 is a bug")
	}
	tw = tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OWNER\tSHARDS\tEPOCH\tFLOOR\tBELOW FLOOR")
	for _, g := range groups {
		label := g.owner
		switch {
		case g.owner == "":
			label = "(nobody)"
		case g.expired:
			label += " (expired)"
		}
		for i, r := range g.runs {
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", label, span(r.first, r.last), span64(r.epochLo, r.epochHi),
				floorAges(since, r.floorLo, r.floorHi), r.below)
		}
	}
	tw.Flush()
}

// shardGroup is one owner's shards (or nobody's, or the expired leases naming an owner), in
// runs of consecutive shard numbers.
type shardGroup struct {
	owner   string
	expired bool
	runs    []shardRun
}

// shardRun is consecutive shards of one group: the range of their epochs and floors, and the
// sum of their rows below the floor.
type shardRun struct {
	first, last      int
	count            int
	epochLo, epochHi int64
	floorLo, floorHi int64
	below            int
}

// groupShards sorts the shards by owner (nobody last; an owner's expired leases after its held
// ones) and shard, and cuts each owner's into runs of consecutive shards.
func groupShards(v *wire.ClusterView) []shardGroup {
	shards := append([]wire.ClusterShard(nil), v.Shards...)
	key := func(s wire.ClusterShard) (bool, string, bool) {
		return s.Owner == "", s.Owner, s.Owner != "" && s.ExpiresAtMs <= v.NowMs
	}
	sort.SliceStable(shards, func(i, j int) bool {
		ni, oi, ei := key(shards[i])
		nj, oj, ej := key(shards[j])
		switch {
		case ni != nj:
			return !ni
		case oi != oj:
			return oi < oj
		case ei != ej:
			return !ei
		}
		return shards[i].Shard < shards[j].Shard
	})
	var out []shardGroup
	for _, s := range shards {
		_, owner, expired := key(s)
		if len(out) == 0 || out[len(out)-1].owner != owner || out[len(out)-1].expired != expired {
			out = append(out, shardGroup{owner: owner, expired: expired})
		}
		g := &out[len(out)-1]
		if n := len(g.runs); n > 0 && g.runs[n-1].last+1 == s.Shard {
			r := &g.runs[n-1]
			r.last, r.count, r.below = s.Shard, r.count+1, r.below+s.RowsBelowFloor
			r.epochLo, r.epochHi = min(r.epochLo, s.Epoch), max(r.epochHi, s.Epoch)
			r.floorLo, r.floorHi = min(r.floorLo, s.FloorMs), max(r.floorHi, s.FloorMs)
			continue
		}
		g.runs = append(g.runs, shardRun{first: s.Shard, last: s.Shard, count: 1, epochLo: s.Epoch, epochHi: s.Epoch,
			floorLo: s.FloorMs, floorHi: s.FloorMs, below: s.RowsBelowFloor})
	}
	return out
}

func span(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

func span64(lo, hi int64) string {
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	return strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(hi, 10)
}

// floorAges is the age of a run's floors: one age, or the oldest and the newest when they read
// differently.
func floorAges(since func(int64) string, lo, hi int64) string {
	old, young := since(lo), since(hi)
	if old == young {
		return old
	}
	return old + " .. " + young
}
