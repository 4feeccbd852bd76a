package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
	"github.com/freshq/freshq/wire"
)

// The cluster harness: N real freshq nodes (a supervisor and its workers each, with their own
// data_dir, segment, runtime directory and loopback port) on one PostgreSQL database, all
// appending to one grant log. A test reads ownership from the database (freshq_shard_lease),
// grants from the grant log, and counters from each node's /metrics.

// Test-only switches of the cluster core, read by every freshq process at start.
const (
	envGrantLog      = "FRESHQ_TEST_GRANT_LOG"
	envFloorOnWriter = "FRESHQ_TEST_FLOOR_ON_WRITER"
)

// clusterShards is S of the tests' databases: enough that three nodes each own several, few
// enough that a sweep over a node's shards stays cheap on a loaded machine.
const clusterShards = 32

var clusterSeq atomic.Int64 // names the nodes' directories (and so their segments) uniquely per binary

type clusterOptions struct {
	nodes    int
	workers  int           // per node, worker 0 included
	leaseTTL time.Duration // cluster.lease_ttl
	yaml     string        // more configuration for every node (queue, render, supervisor; not store, node or cluster)
	env      []string      // KEY=VALUE for every node's processes
}

type testCluster struct {
	t        *testing.T
	opts     clusterOptions
	dsn      string
	db       *pgxpool.Pool
	grantLog string
	nodes    []*clusterNode
}

type clusterNode struct {
	*lnode
	c   *testCluster
	id  string
	dir string
	// stopped are the processes a pause stopped (process groups: the supervisor's and each
	// worker's, which the supervisor puts in groups of their own).
	stopped []int
}

// newCluster creates the database and the grant log and starts opts.nodes nodes at once,
// named node-a, node-b, …; it returns when every node is ready.
func newCluster(t *testing.T, opts clusterOptions) *testCluster {
	t.Helper()
	c := &testCluster{t: t, opts: opts, dsn: pgtest.NewDatabase(t), grantLog: filepath.Join(t.TempDir(), "grants.log")}
	db, err := pgxpool.New(context.Background(), c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	c.db = db
	for i := range opts.nodes {
		id := "node-" + string(rune('a'+i))
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("cl%d-%s", clusterSeq.Add(1), id))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, &clusterNode{c: c, id: id, dir: dir})
	}
	for _, n := range c.nodes {
		n.start()
	}
	for _, n := range c.nodes {
		waitFor(t, n.id+"'s readiness", 60*time.Second, n.ready)
	}
	return c
}

// start launches the node's supervisor (again, after a stop: same identity, data_dir and
// segment path; a new port).
func (n *clusterNode) start() {
	t := n.c.t
	t.Helper()
	store := fmt.Sprintf("store: {backend: postgres, postgres: {dsn: %q, shards: %d}}\n", withAppName(n.c.dsn, n.id), clusterShards)
	ident := fmt.Sprintf("node: {id: %s}\ncluster: {lease_ttl: %s}\n", n.id, n.c.opts.leaseTTL)
	env := append([]string{envGrantLog + "=" + n.c.grantLog}, n.c.opts.env...)
	n.lnode = launchEnv(t, n.dir, n.c.opts.workers, store+ident+n.c.opts.yaml, env)
}

// launchEnv is launch with more environment for the node's processes.
func launchEnv(t *testing.T, dir string, workers int, extraYAML string, env []string) *lnode {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // launch passes the test's environment on; the cluster's nodes share it
	}
	return launch(t, dir, workers, extraYAML)
}

// processGroups are the node's process groups: its supervisor's, and each live worker's. The
// supervisor starts every worker in a group of its own (child.go), so a signal to the
// supervisor's group alone would leave the workers running.
func (n *clusterNode) processGroups() []int {
	sup := n.cmd.Process.Pid
	groups := []int{sup}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces, so fields count from its ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[1] == strconv.Itoa(sup) {
			if pgrp, _ := strconv.Atoi(f[2]); pgrp != sup {
				groups = append(groups, pgrp)
			}
		}
	}
	return groups
}

// pause stops the whole node: the supervisor first, so that it starts no worker meanwhile,
// then every worker's group.
func (n *clusterNode) pause() {
	n.c.t.Helper()
	sup := n.cmd.Process.Pid
	if err := syscall.Kill(-sup, syscall.SIGSTOP); err != nil {
		n.c.t.Fatal(err)
	}
	n.stopped = n.processGroups()
	for _, g := range n.stopped[1:] {
		if err := syscall.Kill(-g, syscall.SIGSTOP); err != nil {
			n.c.t.Fatalf("SIGSTOP of %s's group %d: %v", n.id, g, err)
		}
	}
	if len(n.stopped) < n.c.opts.workers+1 {
		n.c.t.Fatalf("%s: %d process groups stopped, want the supervisor's and %d workers'", n.id, len(n.stopped), n.c.opts.workers)
	}
}

// resume continues what pause stopped, the workers first.
func (n *clusterNode) resume() {
	n.c.t.Helper()
	for i := len(n.stopped) - 1; i >= 0; i-- {
		if err := syscall.Kill(-n.stopped[i], syscall.SIGCONT); err != nil {
			n.c.t.Fatalf("SIGCONT of %s's group %d: %v", n.id, n.stopped[i], err)
		}
	}
	n.stopped = nil
}

// resumeRenderWorkersFirst continues the render workers pause stopped, and the rest of the
// node (worker 0, whose group is worker0's pid, and the supervisor) only once first() holds or
// within wait. It orders what a whole-node SIGCONT leaves to the scheduler: render workers that
// run again before worker 0 has seen that it lost its shards, with nothing but the fence's
// grant bound between them and the rows they had been published. It reports whether first()
// held.
func (n *clusterNode) resumeRenderWorkersFirst(worker0 int, first func() bool, wait time.Duration) bool {
	n.c.t.Helper()
	var rest []int
	for _, g := range n.stopped {
		if g == n.cmd.Process.Pid || g == worker0 {
			rest = append(rest, g)
			continue
		}
		if err := syscall.Kill(-g, syscall.SIGCONT); err != nil {
			n.c.t.Fatalf("SIGCONT of %s's group %d: %v", n.id, g, err)
		}
	}
	if len(rest) != 2 {
		n.c.t.Fatalf("%s: worker 0 (pid %d) or the supervisor is not among the stopped groups %v", n.id, worker0, n.stopped)
	}
	held := false
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if held = first(); held {
			break
		}
	}
	n.stopped = rest
	n.resume()
	return held
}

// kill9 ends the whole node at once, as a machine's death would: every process is stopped
// first, then killed, so that none of them acts after another died.
func (n *clusterNode) kill9() {
	n.c.t.Helper()
	n.pause()
	for _, g := range n.stopped {
		syscall.Kill(-g, syscall.SIGKILL)
	}
	n.stopped = nil
	waitExit(n.c.t, n.lnode, 30*time.Second)
}

// lease is a row of freshq_shard_lease, with whether it was unexpired on the database's clock.
type lease struct {
	shard int
	owner string
	epoch int64
	live  bool
}

func (c *testCluster) leases() []lease {
	c.t.Helper()
	rows, err := c.db.Query(context.Background(),
		`SELECT shard, coalesce(owner, ''), epoch, expires_at > now() FROM freshq_shard_lease ORDER BY shard`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	var out []lease
	for rows.Next() {
		var l lease
		if err := rows.Scan(&l.shard, &l.owner, &l.epoch, &l.live); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// owners maps each shard held by a live lease to its owner.
func (c *testCluster) owners() map[int]string {
	out := map[int]string{}
	for _, l := range c.leases() {
		if l.owner != "" && l.live {
			out[l.shard] = l.owner
		}
	}
	return out
}

// shardsOf are the shards node holds by a live lease, with their epochs.
func (c *testCluster) shardsOf(node string) map[int]int64 {
	out := map[int]int64{}
	for _, l := range c.leases() {
		if l.owner == node && l.live {
			out[l.shard] = l.epoch
		}
	}
	return out
}

// spread reports whether every shard is held by a live lease and every node in ids holds some.
func (c *testCluster) spread(ids ...string) bool {
	own := c.owners()
	if len(own) != clusterShards {
		return false
	}
	per := map[string]int{}
	for _, o := range own {
		per[o]++
	}
	for _, id := range ids {
		if per[id] == 0 {
			return false
		}
	}
	return len(per) == len(ids)
}

// settle waits until every shard is owned by one of the running nodes, each of which owns
// some, and the ownership holds still for a renew period (lease_ttl/4): the joins are over.
func (c *testCluster) settle(ids ...string) {
	c.t.Helper()
	var last map[int]string
	var since time.Time
	waitFor(c.t, fmt.Sprintf("the shards spread over %v", ids), 60*time.Second, func() bool {
		if !c.spread(ids...) {
			last = nil
			return false
		}
		own := c.owners()
		if !sameOwners(own, last) {
			last, since = own, time.Now()
			return false
		}
		return time.Since(since) > c.opts.leaseTTL/4+100*time.Millisecond
	})
	// Every node counts the others and holds its share of the hosts' limits: a node that joined
	// the others renders a host only a grace after (docs/CLUSTER.md).
	waitFor(c.t, "every node's share of the hosts' limits", 5*time.Minute, func() bool {
		for _, n := range c.nodes {
			if !slices.Contains(ids, n.id) {
				continue
			}
			f, ok := n.farm()
			if !ok || f.Nodes != len(ids) || time.Now().UnixMilli() < f.SinceMs+f.GraceMs {
				return false
			}
		}
		return true
	})
}

func sameOwners(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for s, o := range a {
		if b[s] != o {
			return false
		}
	}
	return true
}

// rowsBelowFloor counts the schedule rows due below their own shard's floor: rows no sweep
// will ever publish (the production failure).
func (c *testCluster) rowsBelowFloor() int {
	c.t.Helper()
	var n int
	err := c.db.QueryRow(context.Background(),
		`SELECT count(*) FROM freshq_schedule s JOIN freshq_floor f ON f.shard = s.shard WHERE s.due_at_ms < f.floor_ms`).Scan(&n)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// floorsAbove reports whether every shard's floor is above ms.
func (c *testCluster) floorsAbove(ms int64) bool {
	c.t.Helper()
	var low int
	if err := c.db.QueryRow(context.Background(), `SELECT count(*) FROM freshq_floor WHERE floor_ms <= $1`, ms).Scan(&low); err != nil {
		c.t.Fatal(err)
	}
	return low == 0
}

// missing counts the keys among keys without a schedule row, a target, or a page.
func (c *testCluster) missing(keys []string) (rows, targets, pages int) {
	c.t.Helper()
	b := make([][]byte, len(keys))
	for i, k := range keys {
		b[i] = []byte(k)
	}
	err := c.db.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM freshq_schedule s WHERE s.cache_key = k)),
		count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM freshq_target t WHERE t.cache_key = k)),
		count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM freshq_page p WHERE p.cache_key = k))
		FROM unnest($1::bytea[]) AS k`, b).Scan(&rows, &targets, &pages)
	if err != nil {
		c.t.Fatal(err)
	}
	return rows, targets, pages
}

// countRows counts a table's rows.
func (c *testCluster) countRows(table string) int {
	c.t.Helper()
	var n int
	if err := c.db.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// grants reads the grant log.
func (c *testCluster) grants() []grantEvent {
	c.t.Helper()
	evs, err := readGrantLog(c.grantLog)
	if err != nil {
		c.t.Fatal(err)
	}
	return evs
}

// checkGrants fails the test on any violation of "no shard granted by two nodes at once".
func (c *testCluster) checkGrants() {
	c.t.Helper()
	evs := c.grants()
	if bad := checkGrantLog(evs); len(bad) > 0 {
		c.t.Fatalf("%d grant-log violations, the first: %s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	c.t.Logf("grant log: %d events, no shard granted by two nodes at once", len(evs))
}

// targetKey is the cache key and shard of a desktop target's URL.
func targetKey(t testing.TB, rawURL string) (string, int) {
	u, err := cachekey.NormalizeURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	k := cachekey.New("desktop", u)
	return string(k), int(pgstore.Shard(k, clusterShards))
}

// postTargets posts items to the node as NDJSON. acked is true when every item was accepted
// (a 200 with accepted = len(items)); err is set when the node could not be reached.
func (n *clusterNode) postTargets(items []wire.TargetItem) (acked bool, err error) {
	var body strings.Builder
	for _, it := range items {
		b, _ := json.Marshal(it)
		body.Write(b)
		body.WriteByte('\n')
	}
	resp, err := http.Post("http://"+n.addr+"/v1/targets", "application/x-ndjson", strings.NewReader(body.String()))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var out wire.TargetsResponse
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode == http.StatusOK && out.Accepted == len(items), nil
}

// metric is one value of the node's /metrics (0 when absent or unreachable).
func (n *clusterNode) metric(name string) float64 { return n.metrics()[name] }

// rendered sums the node's renders by outcome ok.
func (n *clusterNode) rendered() float64 { return n.metric(`freshq_render_total{outcome="ok"}`) }

// withAppName is dsn with application_name set to node: the floor audit names the node of
// each advance by it.
func withAppName(dsn, node string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return dsn
		}
		q := u.Query()
		q.Set("application_name", node)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + node
}

// auditFloorAdvances installs, from now on, a record of every floor advance in the database
// itself (a trigger on freshq_floor): the shard, and the node whose connection raised it
// (application_name, withAppName) at the database's clock. A node's own report cannot hide an
// advance from it.
func (c *testCluster) auditFloorAdvances() {
	c.t.Helper()
	_, err := c.db.Exec(context.Background(), `
		CREATE TABLE test_floor_advance (shard int, node text, at_ns bigint);
		CREATE FUNCTION test_floor_advance() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.floor_ms > OLD.floor_ms THEN
				INSERT INTO test_floor_advance VALUES (NEW.shard, current_setting('application_name'),
					(extract(epoch FROM clock_timestamp()) * 1e9)::bigint);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_floor_advance BEFORE UPDATE ON freshq_floor FOR EACH ROW EXECUTE FUNCTION test_floor_advance();`)
	if err != nil {
		c.t.Fatal(err)
	}
}

// floorAdvance is a row of the floor audit.
type floorAdvance struct {
	shard int
	node  string
	ns    int64
}

func (c *testCluster) floorAdvances() []floorAdvance {
	c.t.Helper()
	rows, err := c.db.Query(context.Background(), `SELECT shard, node, at_ns FROM test_floor_advance ORDER BY at_ns`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	var out []floorAdvance
	for rows.Next() {
		var a floorAdvance
		if err := rows.Scan(&a.shard, &a.node, &a.ns); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// staleAdvances are node's floor advances of a shard of lost made after another node acquired
// it and before node acquired it again (from the grant log's acquires).
func staleAdvances(advs []floorAdvance, evs []grantEvent, node string, since int64, lost map[int]int64) []floorAdvance {
	var out []floorAdvance
	for _, a := range advs {
		if _, ok := lost[a.shard]; !ok || a.node != node || a.ns <= since {
			continue
		}
		// The shard's owner at a.ns, by the last acquire before it.
		owner := ""
		for _, ev := range evs {
			if ev.ns > a.ns {
				break
			}
			if ev.kind == "acquire" && ev.shard == a.shard {
				owner = ev.node
			}
		}
		if owner != node {
			out = append(out, a)
		}
	}
	return out
}
