package sweep

import (
	"encoding/binary"
	"hash/fnv"
	"math"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Classes. The score max(0, now − due) / cadence × boost orders the rows of one (cadence,
// boost, lane) class exactly as their due times do, at every now (and so with a rank interval
// in the cadence's place). The store keeps a due index
// per class (badgerstore.Options.Classifier); the sweep merges the classes' heads by the best score
// any row of the class could still have, and reads each class in due order only while that
// bound can still enter the set (classPass, in sweep.go). So a sweep reads about what it
// publishes plus a few rows per class, not the whole due set.
//
// A class is the row's lane inputs and submitted flag (its lane and its boost) and what its
// lateness is divided by, policy.RankInterval — its cadence, the one policy.Cadence resolves
// for it, route ceiling included, unless its write filed a rank interval (queue.policy
// freshness) — quantised into logarithmic buckets: cadenceStep wide for a cadence, rankStep
// wide for a rank interval (a flag of the class says which). Quantising changes no decision:
// every row read is scored with its exact rank interval, and a class's bound divides by the
// bucket's lower edge, so the bound is never below a row's true score. The width only sets how
// far a class is read past the last row it could contribute: rows within a bucket's width of
// the cut-off score. Under ready the classes are the routes' few cadences; under freshness
// each page has a rank interval of its own, and the classes are the buckets they fall in (at
// most 2,430 per lane-flag combination: rank intervals run from policy.MinRankInterval, a
// millisecond, where cadences start at a minute).
//
// The class of a row depends on the configuration (routes and their intervals, the default
// interval). Classifier.Fingerprint names that dependence: a store opened with a classifier of
// another fingerprint rebuilds its class index, and a sweep whose policy has another
// fingerprint than the index it reads (a reload that changed routes or the default interval)
// reads the whole due set instead, as before, until worker 0 restarts.

// cadenceStep is the width of a cadence bucket: 0.1 %. The width changes no decision, only
// how far past its cut-off a class is read: the rows whose lateness lies within the width of
// the cut-off's, about 0.1 % of a class's due rows where they are dense (1 % read 33,497 rows
// to publish 5,000 from 10M due rows one ms apart). A page's cadences take few distinct
// values, so finer buckets add few classes; 16 bits hold the 13,170 buckets of the range.
const cadenceStep = 1.001

// rankStep is the width of a bucket of rank intervals (queue.policy freshness): 1 %. Unlike
// cadences, rank intervals take as many values as there are pages, so the classes are as many
// as the buckets the pages fall in, and a sweep seeks each class's head: at 0.1 % a corpus
// spread over the whole range made 14 times the classes and a sweep 14 times as long
// (BenchmarkSweepClasses with FRESHQ_SWEEP_BENCH_RANKED). At 1 % the range (a millisecond to
// policy.MaxCadence) holds 2,430 buckets, and a class is read up to 1 % past its cut-off.
const rankStep = 1.01

var (
	minCadenceMs = policy.MinCadence.Milliseconds()
	// minRankMs is the lowest rank interval (policy.MinRankInterval): the rank buckets start
	// there, below a cadence's, so that rows ranked by seconds keep their order (2,429 buckets
	// up to policy.MaxCadence at rankStep, within the 16 bits).
	minRankMs    = policy.MinRankInterval.Milliseconds()
	maxCadenceMs = policy.MaxCadence.Milliseconds()
	// The widths' logarithms, computed once: the classifier buckets every row the funnel
	// writes.
	logCadenceStep = math.Log(cadenceStep)
	logRankStep    = math.Log(rankStep)
)

// classBits lays out a class: the lane-input flags and whether the row ranks by a rank
// interval of its own, above a 16-bit bucket (of the cadence, or of the rank interval).
const (
	classBucketBits = 16
	classBucketMask = 1<<classBucketBits - 1
)

const (
	classSubmitted = 1 << iota
	classUrgent
	classNeverRendered
	classFailing
	classRanked // the bucket is of the row's own rank interval, rankStep wide
)

// cadenceBucket is the bucket of a cadence (clamped to policy's usable range): the largest b
// with bucketLowMs(b) ≤ ms.
func cadenceBucket(ms int64) uint32 { return bucketOf(ms, minCadenceMs, cadenceStep, logCadenceStep) }

// bucketLowMs is the lowest cadence of bucket b.
func bucketLowMs(b uint32) float64 { return bucketLow(b, minCadenceMs, cadenceStep) }

// rankBucket is the bucket of a rank interval (clamped to [policy.MinRankInterval,
// policy.MaxCadence]), and rankLowMs the lowest rank interval of bucket b.
func rankBucket(ms int64) uint32 { return bucketOf(ms, minRankMs, rankStep, logRankStep) }
func rankLowMs(b uint32) float64 { return bucketLow(b, minRankMs, rankStep) }

// bucketOf is the bucket of ms (clamped to [lowMs, policy.MaxCadence]) in buckets step wide
// from lowMs (logStep its logarithm): the largest b with bucketLow(b, lowMs, step) ≤ ms.
func bucketOf(ms, lowMs int64, step, logStep float64) uint32 {
	ms = min(max(ms, lowMs), maxCadenceMs)
	b := int(math.Floor(math.Log(float64(ms)/float64(lowMs)) / logStep))
	b = max(b, 0)
	for b > 0 && bucketLow(uint32(b), lowMs, step) > float64(ms) { // float rounding at an edge
		b--
	}
	for bucketLow(uint32(b+1), lowMs, step) <= float64(ms) {
		b++
	}
	return uint32(b)
}

// bucketLow is the lowest interval of bucket b in buckets step wide from lowMs.
func bucketLow(b uint32, lowMs int64, step float64) float64 {
	return float64(lowMs) * math.Pow(step, float64(b))
}

// classOf is the class of a policy row whose rank interval (policy.RankInterval) is rankMs.
func classOf(r *policy.Row, rankMs int64) uint32 {
	var f uint32
	if r.Submitted {
		f |= classSubmitted
	}
	if r.Urgent {
		f |= classUrgent
	}
	if r.NeverRendered {
		f |= classNeverRendered
	}
	if r.Failing {
		f |= classFailing
	}
	if r.RankIntervalMs > 0 {
		return (f|classRanked)<<classBucketBits | rankBucket(rankMs)
	}
	return f<<classBucketBits | cadenceBucket(rankMs)
}

// classInfo is what the sweep knows of a class without reading a row of it.
type classInfo struct {
	lane      policy.Lane
	submitted bool
	lowMs     float64 // the lowest cadence (or rank interval) a row of the class can have
}

func infoOf(class uint32) classInfo {
	f := class >> classBucketBits
	r := policy.Row{Row: store.Row{Projection: store.Projection{Submitted: f&classSubmitted != 0, Lanes: store.Lanes{
		Urgent: f&classUrgent != 0, NeverRendered: f&classNeverRendered != 0, Failing: f&classFailing != 0}}}}
	low := bucketLowMs(class & classBucketMask)
	if f&classRanked != 0 {
		low = rankLowMs(class & classBucketMask)
	}
	return classInfo{lane: policy.LaneOf(&r), submitted: r.Submitted, lowMs: low}
}

// bound is the best score a row of the class due at dueAtMs can have at nowMs (policy.Score
// with the bucket's lowest cadence): never below the row's true score.
func (c *classInfo) bound(dueAtMs, nowMs int64, boost float64) float64 {
	if dueAtMs <= 0 || dueAtMs >= policy.MaxDueMs || nowMs <= dueAtMs {
		return 0
	}
	s := float64(nowMs-dueAtMs) / c.lowMs
	if c.submitted {
		s *= boost
	}
	return s
}

// Classifier classifies schedule rows for the store's class index under one policy. It
// implements store.Classifier.
type Classifier struct {
	pol         *policy.Policy
	fingerprint uint64
}

var _ store.Classifier = (*Classifier)(nil)

// NewClassifier returns the classifier of pol.
func NewClassifier(pol *policy.Policy) *Classifier {
	return &Classifier{pol: pol, fingerprint: fingerprintOf(pol)}
}

// Class implements store.Classifier.
func (c *Classifier) Class(key []byte, p store.Projection) uint32 {
	pr := policy.Row{Key: key, Row: store.Row{Projection: p}}
	cadence, _ := c.pol.Cadence(&pr)
	return classOf(&pr, c.pol.RankInterval(&pr, cadence))
}

// Fingerprint implements store.Classifier: it changes whenever a row's class could.
func (c *Classifier) Fingerprint() uint64 { return c.fingerprint }

// classLayout versions the class layout and bucketing; it is part of every fingerprint.
const classLayout = 4

// fingerprintOf hashes what a row's class depends on: the routes (their order, match, path
// and interval: matching and the ceiling), the default interval, the cadence bounds and the
// bucket width.
func fingerprintOf(pol *policy.Policy) uint64 {
	o := pol.Options()
	h := fnv.New64a()
	var b [8]byte
	num := func(v int64) {
		binary.BigEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	str := func(s string) {
		num(int64(len(s)))
		h.Write([]byte(s))
	}
	num(classLayout)
	num(int64(math.Float64bits(cadenceStep)))
	num(int64(math.Float64bits(rankStep)))
	num(minCadenceMs)
	num(minRankMs)
	num(maxCadenceMs)
	num(o.DefaultInterval.Milliseconds())
	num(int64(len(o.Routes)))
	for _, r := range o.Routes {
		str(r.Match.String())
		str(r.Path)
		num(r.Interval.Milliseconds())
	}
	return h.Sum64()
}
