// Package claim grants render jobs: it takes rows from the shared-memory ready set and leases
// them in shared memory, and falls back to the floored index scan whenever the ready set cannot
// serve. Render workers claim through it with no store at all; worker 0 also serves the
// fallback (and remote renderers) from its store.
//
// # Guarantees
//
//   - A job is granted only with a lease: a row leased by anyone (or in its release grace) is
//     refused at grant time, so no row is rendered by two holders at once.
//   - A claim served from the ready set reads no index: the Claimer holds no store, and touches
//     the Fallback only when the ready set is cold, exhausted, disabled or busy.
//   - Every failure of the ready path degrades to the old order (the floored index scan), never
//     to a stall: New refuses a claimer without a fallback unless it is named NoFallback (one
//     meant to serve from the ready set alone). The scan pages by (due, key), so leased rows sharing one due time never hide
//     the rows behind them, and a claim that found only leased rows within its bound says so
//     (ErrQueuedBehindLeases) instead of answering "nothing due".
//   - A lease's TTL lies in [MinLeaseTTL, queue.lease_ttl] whatever path grants it.
//   - A job is granted only with a slot of its host (politeness, render.hosts): never while the
//     host is paused, and never past its limit of renders in flight, across every process of
//     the node, since each slot is a host token of the lease table (package hosts owns the answer:
//     hosts.Admit). A
//     take refused for its host leaves the row as it was, unleased and due; it is counted
//     (shm.CounterRenderRefusedHost), never a failure of the page.
//
// Grants are counted by source in the claiming worker's shm block
// (freshq_claim_granted_total{source="ready"|"index"}): a node serving every claim from the
// index looks healthy in every other series.
package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
)

// Source says where a job came from.
type Source uint8

const (
	SourceReady Source = iota + 1 // the shared-memory ready set
	SourceIndex                   // the floored index scan
)

func (s Source) String() string {
	switch s {
	case SourceReady:
		return "ready"
	case SourceIndex:
		return "index"
	}
	return "unknown"
}

// Job is one granted row. The holder must release its Lease (or let it lapse).
type Job struct {
	Key       []byte
	KeyHash   uint64
	DueAtMs   int64
	CadenceMs int64
	Submitted bool
	// Checkable is the row's hint that its origin sent validators (store.Projection.Checkable):
	// a render worker asks worker 0 whether it may check the page with a conditional GET only
	// for a checkable job, and renders any other in full without the question. A hint, not a
	// permission: worker 0 answers from the target.
	Checkable bool
	Lane      policy.Lane
	Score     float64
	Source    Source
	Lease     shm.Lease
	// HostToken is the job's slot of its host (hosts.Admit). Its holder gives it back with
	// ReleaseHost as soon as the render ends, before the result is delivered: the host's
	// renders in flight are the renders running, not the results queued.
	HostToken shm.Lease
}

// ReleaseHost gives the job's host slot back, at once (no grace). A job without one (a zero
// token, such as a job of a remote renderer, whose slot worker 0 keeps) is left alone.
func (j *Job) ReleaseHost(leases *shm.Leases, nowMs int64) {
	if j.HostToken.State != 0 {
		leases.Release(j.HostToken, nowMs, 0)
		j.HostToken = shm.Lease{}
	}
}

// Fallback grants up to req.N jobs from the floored index scan, leased for req.Holder for
// req.TTLMs. Worker 0 implements it over its store (IndexSource); a render worker implements
// it as a call to worker 0 over the control socket. It returns ErrQueuedBehindLeases, with no
// job, when its bounded scan found only leased rows and more due rows behind them. With any
// other error it may return jobs it leased before it failed: the caller owns their leases.
type Fallback interface {
	ClaimIndex(ctx context.Context, req IndexClaim) ([]Job, error)
}

// IndexClaim is one request to the index fallback.
type IndexClaim struct {
	N      int
	Holder uint64
	TTLMs  int64 // the lease TTL asked for; resolved by LeaseTTL
}

// MinLeaseTTL is the shortest lease a claim may ask for: a render that cannot finish in a
// minute cannot finish at all, and a shorter lease only churns the table. A claim's TTL lies
// in [MinLeaseTTL, queue.lease_ttl] on every path.
const MinLeaseTTL = time.Minute

// LeaseTTL resolves the TTL a claim asked for against queue.lease_ttl (maxMs): 0 means maxMs,
// and anything else is held within [MinLeaseTTL, maxMs]. Callers that take a TTL from outside
// the process refuse one out of that range before they get here.
func LeaseTTL(maxMs, requestedMs int64) int64 {
	if requestedMs <= 0 {
		return maxMs
	}
	return min(max(requestedMs, MinLeaseTTL.Milliseconds()), maxMs)
}

// Options wires a Claimer.
type Options struct {
	Segment  *shm.Segment
	Worker   *shm.Worker // the claiming worker's block, for grant counters
	Fallback Fallback
	Settings func() *Settings // the settings in force, read once per claim (a reload applies to the next)
	Now      func() int64
	Holder   uint64 // pid<<16 | worker index
	// Granted, when set, is told of every job granted from the ready set, with the wall-clock
	// time (ns) of the grant, taken before the fence check that let it through. Only the test
	// switch of a cluster's grant log sets it (internal/grantlog).
	Granted func(key []byte, atNs int64)
}

// Settings is what a claim reads of the configuration: the lease a grant takes, whether the
// ready set serves, and the hosts' limits a grant's host slot is taken under. It is narrowed
// where the node is assembled and read whole once per claim.
type Settings struct {
	LeaseTTL     time.Duration // queue.lease_ttl: a grant's lease, and the longest a claim may ask for
	ReadyEnabled bool          // queue.ready.enabled: false sends every claim to the fallback
	Hosts        hosts.Limits  // render.hosts
}

// Claimer grants jobs to one worker. It is safe for concurrent use.
type Claimer struct {
	opts Options
}

// ErrMissingDependency is returned by New when a required option is missing.
var ErrMissingDependency = errors.New("claim: missing dependency")

// NoFallback is the Fallback of a claimer meant to serve from the ready set alone: it grants
// nothing. A render worker's claimer always has the floored index scan instead, so that a cold,
// exhausted or disabled ready set degrades and never stalls; only a test that isolates the
// ready path passes NoFallback, and says so by naming it.
var NoFallback Fallback = noFallback{}

type noFallback struct{}

func (noFallback) ClaimIndex(context.Context, IndexClaim) ([]Job, error) { return nil, nil }

// New returns a Claimer. Segment, Fallback (NoFallback to serve from the ready set alone),
// Settings and Now are required and refused when nil; Worker and Granted only observe and may
// be left out.
func New(opts Options) (*Claimer, error) {
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Segment", opts.Segment == nil},
		{"Fallback", opts.Fallback == nil},
		{"Settings", opts.Settings == nil},
		{"Now", opts.Now == nil},
	} {
		if dep.missing {
			return nil, fmt.Errorf("%w: Claimer needs %s", ErrMissingDependency, dep.name)
		}
	}
	return &Claimer{opts: opts}, nil
}

// Claim grants up to n jobs: from the ready set while it serves, then from the fallback for the
// rest. It returns fewer than n (possibly none) when nothing more is due. With an error it may
// still return jobs: they are leased to the caller, who renders them or gives them back; a
// claim never leases a row it does not hand out.
func (c *Claimer) Claim(ctx context.Context, n int) ([]Job, error) {
	return c.ClaimTTL(ctx, n, 0)
}

// ClaimTTL is Claim with leases of ttlMs instead of queue.lease_ttl, for a remote renderer that
// states how long it needs; the TTL is resolved by LeaseTTL, on the ready path and the
// fallback's alike.
func (c *Claimer) ClaimTTL(ctx context.Context, n int, ttlMs int64) ([]Job, error) {
	return c.ClaimFor(ctx, n, ttlMs, c.opts.Holder)
}

// ClaimFor is ClaimTTL on behalf of holder rather than the Claimer's own: worker 0 claims for
// each remote renderer under that renderer's holder id, so that its leases are counted and
// explained as its own.
func (c *Claimer) ClaimFor(ctx context.Context, n int, ttlMs int64, holder uint64) ([]Job, error) {
	set := c.opts.Settings()
	now := c.opts.Now()
	ttl := LeaseTTL(set.LeaseTTL.Milliseconds(), ttlMs)
	jobs := make([]Job, 0, n)
	hostBound := false
	if set.ReadyEnabled {
		jobs, hostBound = c.takeReady(jobs, n, now, ttl, holder, &set.Hosts)
		c.observeLateness(jobs, now)
	}
	// A set that serves but whose next rows' hosts are all full is no reason to scan the
	// index: its rows are the same hosts', and a scan costs worker 0 a read per row.
	if len(jobs) == n || hostBound {
		return jobs, nil
	}
	more, err := c.opts.Fallback.ClaimIndex(ctx, IndexClaim{N: n - len(jobs), Holder: holder, TTLMs: ttl})
	if c.opts.Worker != nil && len(more) > 0 {
		c.opts.Worker.Add(shm.CounterClaimIndex, uint64(len(more)))
	}
	c.observeLateness(more, now)
	jobs = append(jobs, more...)
	if err != nil && !errors.Is(err, ErrQueuedBehindLeases) {
		err = fmt.Errorf("claim: index fallback: %w", err)
	}
	return jobs, err
}

// observeLateness records each granted job's lateness ratio, (now − due) / cadence without the
// sitemap boost, in its lane's histogram (freshq_lateness_ratio{lane}).
func (c *Claimer) observeLateness(jobs []Job, now int64) {
	w := c.opts.Worker
	if w == nil {
		return
	}
	for i := range jobs {
		j := &jobs[i]
		ratio := 0.0
		if j.CadenceMs > 0 && now > j.DueAtMs {
			ratio = float64(now-j.DueAtMs) / float64(j.CadenceMs)
		}
		lane := min(shm.Counter(j.Lane), shm.NumLanes-1)
		w.Observe(shm.CounterLateness+lane*shm.LatenessStride, shm.LatenessBuckets[:], ratio, 1e6)
	}
}

// takeReady takes from the ready set until it has n jobs or the set stops serving. Each take
// consumes its entry (at most once per generation), whether or not the lease is granted: a
// refused entry is leased by someone else, who is rendering it.
//
// An entry whose host refuses (hosts.Admit) is consumed too, and its row stays due for the next
// set. A claim stops after maxHostRefusals of them and reports hostBound: it must not eat the
// set while a host is full (the rows behind are most likely the same host's, whose slots
// free as its renders end), and it goes to no fallback, since the set still serves.
//
// A granted lease is then checked against the node's fence (shm.Fence), at a time no earlier
// than the grant: an entry of a shard the node has given up since the set was published, or
// taken when the node's shard leases may have lapsed, gives its lease back at once and is not
// handed out. The row is still due; its owner grants it.
func (c *Claimer) takeReady(jobs []Job, n int, now, ttl int64, holder uint64, hostsCfg *hosts.Limits) (_ []Job, hostBound bool) {
	seg := c.opts.Segment
	ready, leases, fence := seg.Ready(), seg.Leases(), seg.Fence()
	var e shm.Entry
	granted, refused, fenced, hostRefused := 0, 0, 0, 0
	for len(jobs) < n {
		if ready.Take(&e) != shm.Taken {
			break // cold, exhausted, disabled or busy: the fallback serves the rest
		}
		// The host first: a throttled host's entry costs one lookup and no row lease. The
		// entry is consumed either way; the row stays due, and the sweep caps how many entries
		// one host has in a set, so a throttled host cannot eat the set (sweep).
		token, ok := hosts.Admit(seg, hostsCfg, e.Key, now, ttl, holder)
		if !ok {
			if hostRefused++; hostRefused == maxHostRefusals {
				hostBound = true
				break
			}
			continue
		}
		lease, st := leases.Acquire(e.KeyHash, now, ttl, holder)
		if st != shm.Acquired {
			leases.Release(token, now, 0)
			refused++
			if st == shm.Full {
				break // the table is full around this key; another take will likely meet the same
			}
			continue
		}
		var grantedNs int64
		if c.opts.Granted != nil {
			grantedNs = time.Now().UnixNano()
		}
		if !fence.Allows(e.Fence, c.opts.Now()) {
			leases.Release(lease, now, 0)
			leases.Release(token, now, 0)
			fenced++
			break // every entry of the set carries the same version: the rest would fail alike
		}
		if c.opts.Granted != nil {
			c.opts.Granted(e.Key, grantedNs)
		}
		jobs = append(jobs, Job{
			Key: append([]byte(nil), e.Key...), KeyHash: e.KeyHash, DueAtMs: e.DueAtMs, CadenceMs: e.CadenceMs,
			Submitted: e.Submitted, Checkable: e.Checkable, Lane: policy.Lane(e.Lane), Score: e.Score,
			Source: SourceReady, Lease: lease, HostToken: token,
		})
		granted++
	}
	if w := c.opts.Worker; w != nil {
		if granted > 0 {
			w.Add(shm.CounterClaimReady, uint64(granted))
		}
		if refused > 0 {
			w.Add(shm.CounterLeaseRefused, uint64(refused))
		}
		if fenced > 0 {
			w.Add(shm.CounterGrantsFenced, uint64(fenced))
		}
		if hostRefused > 0 {
			w.Add(shm.CounterRenderRefusedHost, uint64(hostRefused))
		}
	}
	return jobs, hostBound
}

// maxHostRefusals is how many entries one claim may pass over for their hosts before it gives
// up: enough to step past a full host's entries to another host's (the sweep caps each host's
// share of the set), few enough that a set of one full host is eaten slowly.
const maxHostRefusals = 8
