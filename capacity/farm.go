package capacity

import (
	"cmp"
	"slices"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/wire"
)

// Figures is what the node publishes of its capacity with each heartbeat in a cluster: the
// demand of the shards it holds, by class, what its meter measured, and its backlog.
func (s *Service) Figures() wire.NodeCapacity {
	now := s.Now()
	d, c := s.Ledger.Demand(), s.Meter.Rate(now)
	f := wire.NodeCapacity{AtMs: now, DemandPerSecond: d.Total, DemandRows: d.Rows, Classes: make([]wire.DemandClass, len(d.Classes)),
		CapacityPerSecond: c.PerSecond, RetryShare: c.RetryShare, RecheckShare: c.RecheckShare, Renders: c.Renders,
		WindowS: float64(c.WindowMs) / 1000, Backlog: s.backlog()}
	for i, cl := range d.Classes {
		f.Classes[i] = wire.DemandClass{Lane: cl.Lane.String(), Route: cl.Route, Submitted: cl.Submitted, Rows: cl.Rows, PerSecond: cl.PerSecond}
	}
	if s.Shards != nil {
		f.Shards = s.Shards()
	}
	s.mu.Lock()
	f.RecountedAtMs, f.RecountDrift = s.recountedAtMs, s.drift
	s.mu.Unlock()
	return f
}

// laneNamed is the lane a published class names; ok is false for a name this version does not
// know (a newer node's lane), whose demand then counts as discovered: neither on time like
// urgent nor boosted like submitted.
func laneNamed(name string) (policy.Lane, bool) {
	for l := range policy.NumLanes {
		if l.String() == name {
			return l, true
		}
	}
	return policy.LaneDiscovered, false
}

// Farm sums the figures of the farm's live nodes and projects the sum with boost (the submitted
// rows' boost; the nodes of a farm run one configuration). A node whose figures are unknown is
// left out of the sums and named in Unknown. Demand adds up class by class; capacity, renders
// and backlogs add up; the retry and recheck shares are the farm's: weighted by each node's
// renders per second. The meters' windows differ by at most the nodes' start times, so the sum
// of rates is the farm's rate over the last window.
func Farm(nodes []wire.FarmNode, boost float64) wire.FarmCapacity {
	out := wire.FarmCapacity{Nodes: len(nodes), PerNode: slices.Clone(nodes)}
	slices.SortFunc(out.PerNode, func(a, b wire.FarmNode) int { return cmp.Compare(a.ID, b.ID) })
	type key struct {
		lane      policy.Lane
		route     string
		submitted bool
	}
	classes := map[key]*Class{}
	var c Capacity
	var retry, recheck, windowS, drift float64
	var backlog uint64
	var oldest int64
	for _, n := range out.PerNode {
		f := n.Capacity
		if f == nil {
			out.Unknown = append(out.Unknown, n.ID)
			continue
		}
		out.Reporting++
		for _, wc := range f.Classes {
			lane, _ := laneNamed(wc.Lane)
			k := key{lane, wc.Route, wc.Submitted}
			cl := classes[k]
			if cl == nil {
				cl = &Class{Lane: lane, Route: wc.Route, Submitted: wc.Submitted}
				classes[k] = cl
			}
			cl.Rows += wc.Rows
			cl.PerSecond += wc.PerSecond
		}
		c.PerSecond += f.CapacityPerSecond
		c.Renders += f.Renders
		retry += f.RetryShare * f.CapacityPerSecond
		recheck += f.RecheckShare * f.CapacityPerSecond
		windowS = max(windowS, f.WindowS)
		backlog += f.Backlog
		drift += f.RecountDrift
		if oldest == 0 || f.RecountedAtMs < oldest {
			oldest = f.RecountedAtMs
		}
	}
	if c.PerSecond > 0 {
		c.RetryShare, c.RecheckShare = retry/c.PerSecond, recheck/c.PerSecond
	}
	c.WindowMs = int64(windowS * 1000)
	d := Demand{ByLane: map[string]float64{}, ByRoute: map[string]float64{}}
	for l := range policy.NumLanes {
		d.ByLane[l.String()] = 0
	}
	for _, cl := range classes {
		d.Classes = append(d.Classes, *cl)
	}
	// One order, whatever the nodes' order or the map's: the float sums below are then the same
	// on every node that sums the same rows.
	slices.SortFunc(d.Classes, func(a, b Class) int {
		return cmp.Or(cmp.Compare(a.Lane, b.Lane), cmp.Compare(a.Route, b.Route), boolCompare(a.Submitted, b.Submitted))
	})
	for _, cl := range d.Classes {
		d.Rows += cl.Rows
		d.Total += cl.PerSecond
		d.ByLane[cl.Lane.String()] += cl.PerSecond
		d.ByRoute[cl.Route] += cl.PerSecond
	}
	out.Capacity = viewOf(d, c, boost, backlog)
	out.RecountedAtMs, out.RecountDrift = oldest, drift
	return out
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
