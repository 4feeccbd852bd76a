package cluster

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
)

// Options wires a Member.
type Options struct {
	Registry    Registry
	ID          string        // node.id
	Addr        string        // the node's listen address, for operators
	Incarnation string        // unique per supervisor run: a restarted worker 0 keeps it
	TTL         time.Duration // cluster.lease_ttl
	Shards      int           // S, to find the shard of a granted key from its hash
	// Owned gives the store the shards the node holds (Engine.SetOwned).
	Owned  func(ctx context.Context, shards []int32, epochs []int64) error
	Fence  *shm.Fence
	Leases *shm.Leases
	Worker *shm.Worker      // worker 0's block: the shard counters
	Now    func() time.Time // the local clock
	Log    zerolog.Logger
	// Members, when set, is told at every tick that read the cluster of the live nodes' ids
	// (this node's among them unless it is stopping) and the database's clock then: the hosts'
	// farm divides each host's limit among them (hosts.Farm.Members).
	Members func(me string, live []string, clusterNow time.Time)
	// Figures, when set and the Registry is a FigureRegistry, is the node's capacity figures
	// (a JSON object, opaque here), published with every heartbeat: the farm's capacity is
	// the sum of what the live nodes published (package capacity).
	Figures func() []byte
	// Event, when set, is told of every acquire, release (before it commits) and loss: the
	// cluster's grant log, a test switch. nil in production.
	Event func(kind string, shard int32, epoch int64)
	// After is time.After for the waits of Start; Ticks replaces the loop's ticker of TTL/4. A
	// test gives its own, with Now, to move time without sleeping, and drives rounds with Tick.
	After func(time.Duration) <-chan time.Time
	Ticks <-chan time.Time
	// Mono reads the monotonic clock: the time elapsed since a fixed point, which no step of
	// the wall clock (Now) moves. The grant window is measured on it. nil: Go's monotonic
	// clock. A test gives its own, to step the wall clock alone.
	Mono func() time.Duration
	// AfterFunc is time.AfterFunc on Mono's clock: it ends the grant window when the window
	// runs out and no renewal extended it (a node paused, partitioned or slow), whatever the
	// wall clock says by then. nil: time.AfterFunc.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Retick, when set, is how soon the member ticks again after a tick that found the
	// membership moving (the live nodes changed since its last tick, or a shard it should
	// hold is held by another live node, which hands it over at its own tick), on AfterFunc's
	// clock; and the least time between two ticks that Nudge asks for. 0: the member ticks
	// every TTL/4 only.
	Retick time.Duration
}

// Member is a node's part in the cluster: it registers the node, then every TTL/4 heartbeats,
// reads the cluster, and acquires, renews, hands over or gives up shards (PlanFor). Stop hands
// every shard over at once. It keeps the startstop contract: Stop before Start is a no-op, and
// Stop twice is safe.
type Member struct {
	opts Options

	mu      sync.Mutex
	held    map[int32]int64 // shard → epoch; guarded by mu
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}

	monoOrigin time.Time   // Go's monotonic reading at NewMember, when Options.Mono is nil
	windowEnd  func() bool // stops the timer that ends the current grant window; guarded by mu
	window     uint64      // counts grant windows, so a timer of an earlier one does nothing; guarded by mu

	// The ticks between the ticker's (Options.Retick), guarded by mu: nudges asks the loop
	// for a tick; lastTick is when the last one began (mono), lastLive the live nodes it
	// read, and retickStop stops the timer of the tick asked for after it.
	nudges     chan struct{}
	lastTick   time.Duration
	lastLive   []string
	retickStop func() bool
}

// NewMember returns a Member; Start registers it.
func NewMember(opts Options) *Member {
	return &Member{opts: opts, held: map[int32]int64{}, done: make(chan struct{}), monoOrigin: time.Now(),
		nudges: make(chan struct{}, 1)}
}

// Nudge asks for a tick now, rather than at the next: the hosts' farm read a node its
// membership does not count (hosts.Farm.OnMembersBehind). It is spaced Options.Retick at
// least from the tick before, and does nothing without Retick.
func (m *Member) Nudge() {
	if m.opts.Retick <= 0 {
		return
	}
	select {
	case m.nudges <- struct{}{}:
	default:
	}
}

// afterFunc is Options.AfterFunc, or time.AfterFunc.
func (m *Member) afterFunc(d time.Duration, f func()) func() bool {
	if m.opts.AfterFunc != nil {
		return m.opts.AfterFunc(d, f)
	}
	return time.AfterFunc(d, f).Stop
}

// mono reads the monotonic clock (Options.Mono).
func (m *Member) mono() time.Duration {
	if m.opts.Mono != nil {
		return m.opts.Mono()
	}
	return time.Since(m.monoOrigin) // time.Now's monotonic reading: no wall step moves it
}

// openGrantWindow lets the node grant until three quarters of the TTL after monoStart, the
// monotonic reading before the tick's heartbeat: every lease renewed or taken in the tick
// expires a full TTL after its statement ran on the database, later than that. The window is
// measured on the monotonic clock; grantUntil, which the takers compare with their wall clock,
// is what is left of it from the wall clock now, and a timer on the monotonic clock ends it
// (grantUntil in the past) when it runs out: a wall clock stepped back after this cannot make
// the node grant longer. A stepped forward one only ends it sooner. The caller holds m.mu.
func (m *Member) openGrantWindow(monoStart time.Duration) {
	o := m.opts
	left := o.TTL*3/4 - (m.mono() - monoStart)
	if m.windowEnd != nil {
		m.windowEnd()
	}
	m.window++
	if left <= 0 {
		o.Fence.SetGrantUntil(1) // the tick outlasted the window
		return
	}
	o.Fence.SetGrantUntil(o.Now().Add(left).UnixMilli())
	window := m.window
	m.windowEnd = m.afterFunc(left, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.window == window { // no renewal since: the window ran out
			o.Fence.SetGrantUntil(1)
		}
	})
}

// Start registers the node and makes its first tick before it returns, so that the node's
// first sweep already works on its shards, then ticks every TTL/4 until Stop. Until the first
// renewal nothing is granted (grantUntil in the past), and every entry a previous worker 0
// published is fenced off (the version is bumped): this process does not know what it held.
func (m *Member) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.stopped {
		return nil
	}
	o := m.opts
	o.Fence.SetGrantUntil(1)
	o.Fence.Bump()
	if err := m.register(ctx); err != nil {
		return err
	}
	m.started = true
	m.tickLocked(ctx)
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	go m.loop(lctx)
	o.Log.Info().Str("node", o.ID).Str("addr", o.Addr).Dur("lease_ttl", o.TTL).Int("shards", len(m.held)).Msg("cluster member started")
	return nil
}

// register records the node. When its identity is held by another incarnation that still
// heartbeats, it tries again every TTL/4 for a little over a TTL: a node restarted at once
// after a crash (kill -9, a power cut) finds its previous run's heartbeat still fresh, and
// waits it out rather than fail; a second process beside a live one is still refused, since
// the live one keeps heartbeating.
func (m *Member) register(ctx context.Context) error {
	o := m.opts
	deadline := o.Now().Add(o.TTL + o.TTL/4)
	for {
		err := o.Registry.Register(ctx, o.ID, o.Addr, o.Incarnation, o.TTL)
		if !errors.Is(err, ErrIdentityInUse) || !o.Now().Before(deadline) {
			return err
		}
		o.Log.Warn().Str("node", o.ID).Msg("cluster: the node id is held by a process that heartbeat within the lease TTL; waiting for it to expire")
		select {
		case <-ctx.Done():
			return err
		case <-m.after(o.TTL / 4):
		}
	}
}

// after is time.After, or the test's.
func (m *Member) after(d time.Duration) <-chan time.Time {
	if m.opts.After != nil {
		return m.opts.After(d)
	}
	return time.After(d)
}

func (m *Member) loop(ctx context.Context) {
	defer close(m.done)
	ticks := m.opts.Ticks
	if ticks == nil {
		t := time.NewTicker(m.opts.TTL / 4)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		case <-m.nudges:
			m.mu.Lock()
			soon := m.mono()-m.lastTick < m.opts.Retick
			m.mu.Unlock()
			if soon {
				continue // the tick just made read the cluster as lately as this one would
			}
		}
		m.mu.Lock()
		if !m.stopped {
			m.tickLocked(ctx)
		}
		m.mu.Unlock()
	}
}

// Stop ends the ticks and hands every shard over at once: the node is marked stopping (so that
// no node waits for it), stops granting, and releases its leases, which the live nodes take at
// their next tick, without waiting for a TTL.
func (m *Member) Stop() {
	m.mu.Lock()
	if !m.started || m.stopped {
		m.stopped = true
		m.mu.Unlock()
		return
	}
	m.stopped = true
	m.cancel()
	if m.windowEnd != nil {
		m.windowEnd()
	}
	if m.retickStop != nil {
		m.retickStop()
	}
	m.mu.Unlock()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.opts
	ctx, cancel := context.WithTimeout(context.Background(), o.TTL)
	defer cancel()
	if err := o.Registry.SetStopping(ctx, o.ID, o.Incarnation); err != nil {
		o.Log.Error().Err(err).Msg("cluster: marking the node stopping failed; its shards move after the lease TTL")
	}
	n := len(m.held)
	m.giveUp(ctx, slices.Collect(maps.Keys(m.held)), "release")
	if err := o.Registry.Deregister(ctx, o.ID, o.Incarnation); err != nil {
		o.Log.Error().Err(err).Msg("cluster: deregister failed")
	}
	o.Log.Info().Str("node", o.ID).Int("shards", n).Msg("cluster member stopped; shards handed over")
}

// Held returns the shards the node holds and their epochs, ascending.
func (m *Member) Held() (shards []int32, epochs []int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heldLocked()
}

func (m *Member) heldLocked() ([]int32, []int64) {
	shards := slices.Sorted(maps.Keys(m.held))
	epochs := make([]int64, len(shards))
	for i, sh := range shards {
		epochs[i] = m.held[sh]
	}
	return shards, epochs
}

// Tick runs one round now, as the loop does every TTL/4 (a test whose Options.Ticks never
// fires drives the rounds itself). It does nothing before Start and once stopped.
func (m *Member) Tick(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started && !m.stopped {
		m.tickLocked(ctx)
	}
}

// tickLocked is one round: heartbeat, read, give up what is lost or wanted elsewhere, renew
// the rest, acquire what should be ours. grantUntil moves on only when the heartbeat and every
// renewal went through, from the local time before the first of them.
func (m *Member) tickLocked(ctx context.Context) {
	o := m.opts
	monoStart := m.mono()
	m.lastTick = monoStart
	ctx, cancel := context.WithTimeout(ctx, o.TTL/2)
	defer cancel()
	if err := m.heartbeat(ctx); err != nil {
		if errors.Is(err, ErrIdentityInUse) {
			o.Log.Error().Err(err).Str("node", o.ID).Msg("cluster: another process took this node's identity; giving every shard up")
			m.giveUp(ctx, slices.Collect(maps.Keys(m.held)), "lost")
			return
		}
		o.Log.Warn().Err(err).Msg("cluster: heartbeat failed")
		return
	}
	records, err := o.Registry.ReadView(ctx)
	view := View(records)
	if err != nil {
		o.Log.Warn().Err(err).Msg("cluster: reading the cluster failed")
		return
	}
	live := view.LiveIDs(o.TTL)
	if o.Members != nil {
		o.Members(o.ID, live, view.Now)
	}
	plan := PlanFor(&view, o.ID, o.TTL)
	m.retickIfMoving(&view, live)

	// Shards held here that the view no longer shows as ours at our epoch are lost.
	viewEpoch := map[int32]int64{}
	for _, l := range view.Leases {
		if l.Owner == o.ID {
			viewEpoch[l.Shard] = l.Epoch
		}
	}
	var lost []int32
	for sh, e := range m.held {
		if ve, ok := viewEpoch[sh]; !ok || ve != e {
			lost = append(lost, sh)
		}
	}
	m.giveUp(ctx, lost, "lost")
	var release []int32
	for _, l := range plan.Release {
		release = append(release, l.Shard)
		m.held[l.Shard] = l.Epoch // a release names the epoch; held or adopted, it goes now
	}
	m.giveUp(ctx, release, "release")

	// Renew what we keep, adopting a lease of ours this process did not know (a restarted
	// worker 0 of the same node).
	renewOK := true
	if len(plan.Keep) > 0 {
		shards, epochs := make([]int32, len(plan.Keep)), make([]int64, len(plan.Keep))
		for i, l := range plan.Keep {
			shards[i], epochs[i] = l.Shard, l.Epoch
		}
		renewed, err := o.Registry.Renew(ctx, o.ID, shards, epochs, o.TTL)
		if err != nil {
			o.Log.Warn().Err(err).Msg("cluster: renewing the shard leases failed")
			renewed, renewOK = map[int32]bool{}, false
		}
		var gone []int32
		for i, sh := range shards {
			switch {
			case renewed[sh]:
				if _, ok := m.held[sh]; !ok {
					m.event("acquire", sh, epochs[i])
				}
				m.held[sh] = epochs[i]
			case err == nil:
				if _, ok := m.held[sh]; ok {
					gone = append(gone, sh)
				}
			}
		}
		m.giveUp(ctx, gone, "lost")
	}
	for _, l := range plan.Acquire {
		epoch, ok, err := o.Registry.Acquire(ctx, o.ID, l.Shard, l.Epoch, o.TTL)
		if err != nil {
			o.Log.Warn().Err(err).Int32("shard", l.Shard).Msg("cluster: acquire failed")
			continue
		}
		if ok {
			m.event("acquire", l.Shard, epoch)
			m.held[l.Shard] = epoch
			o.Worker.Add(shm.CounterShardsAcquired, 1)
		}
	}
	shards, epochs := m.heldLocked()
	if err := o.Owned(ctx, shards, epochs); err != nil {
		o.Log.Warn().Err(err).Msg("cluster: the store could not take the shards acquired")
	}
	o.Worker.Set(shm.CounterShardsOwned, uint64(len(shards)))
	if renewOK {
		m.openGrantWindow(monoStart)
	}
	if len(plan.Acquire)+len(plan.Release)+len(lost) > 0 {
		o.Log.Info().Str("node", o.ID).Int("held", len(shards)).Int("acquired", len(plan.Acquire)).
			Int("released", len(plan.Release)).Int("lost", len(lost)).Msg("cluster: shards moved")
	}
}

// retickIfMoving asks for a tick Retick after this one when the membership is moving: the live
// nodes changed since the last tick (the others may not have read it yet: a node that starts
// with others may have read only some of them), or a shard this node should hold is held by
// another live node, which hands it over at its own tick. A cluster that forms, or a node that
// joins, then holds its shards and its share of each host's limit within a Retick or two of
// every node's first tick, not a quarter of a TTL or two later. The caller holds m.mu.
func (m *Member) retickIfMoving(view *View, live []string) {
	o := m.opts
	if o.Retick <= 0 {
		return
	}
	live = slices.Sorted(slices.Values(live))
	moving := !slices.Equal(m.lastLive, live)
	m.lastLive = live
	for _, l := range view.Leases {
		if moving {
			break
		}
		moving = l.Owner != "" && l.Owner != o.ID && l.ExpiresAt.After(view.Now) &&
			slices.Contains(live, l.Owner) && Desired(l.Shard, live) == o.ID
	}
	if !moving {
		return
	}
	if m.retickStop != nil {
		m.retickStop()
	}
	m.retickStop = m.afterFunc(o.Retick, m.Nudge)
}

// giveUp stops the node's grants of shards, then, for a release, hands their leases over:
// the fence version is bumped (no entry published before is granted), the store stops
// working on them, the node's live grants of them are revoked (their results are fenced),
// and only then is the lease released, so that no other node can grant a row of them while
// this one still may.
func (m *Member) giveUp(ctx context.Context, shards []int32, kind string) {
	if len(shards) == 0 {
		return
	}
	o := m.opts
	o.Fence.Bump()
	epochs := make([]int64, len(shards))
	gone := make(map[int32]bool, len(shards))
	for i, sh := range shards {
		epochs[i] = m.held[sh]
		gone[sh] = true
		delete(m.held, sh)
		m.event(kind, sh, epochs[i])
	}
	left, leftEpochs := m.heldLocked()
	if err := o.Owned(ctx, left, leftEpochs); err != nil {
		o.Log.Warn().Err(err).Msg("cluster: the store could not drop the shards given up")
	}
	now := o.Now().UnixMilli()
	s := uint64(o.Shards)
	for _, h := range o.Leases.LiveKeys(now, func(h uint64) bool { return gone[int32(h%s)] }) {
		o.Leases.Revoke(h, now, 0)
	}
	o.Worker.Add(shm.CounterShardsLost, uint64(len(shards)))
	o.Worker.Set(shm.CounterShardsOwned, uint64(len(left)))
	if kind == "release" {
		if err := o.Registry.Release(ctx, o.ID, shards, epochs); err != nil {
			o.Log.Warn().Err(err).Msg("cluster: handing shards over failed; they move after the lease TTL")
		}
	}
}

// heartbeat renews the node's heartbeat, with its figures when it has some to publish.
func (m *Member) heartbeat(ctx context.Context) error {
	o := m.opts
	if fr, ok := o.Registry.(FigureRegistry); ok && o.Figures != nil {
		if f := o.Figures(); f != nil {
			return fr.HeartbeatFigures(ctx, o.ID, o.Incarnation, f)
		}
	}
	return o.Registry.Heartbeat(ctx, o.ID, o.Incarnation)
}

func (m *Member) event(kind string, shard int32, epoch int64) {
	if m.opts.Event != nil {
		m.opts.Event(kind, shard, epoch)
	}
}
