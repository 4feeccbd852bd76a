#!/usr/bin/env bash
# The queue with 1, 2 and 3 freshq nodes on one PostgreSQL database, side by side in one run
# (BenchmarkQueueCluster, cmd/supervisor/bench_cluster_test.go), written as a table to
# scripts/bench/by-hand/cluster.md; then one site whose limit (2) is below the node count (3)
# on three nodes (BenchmarkClusterSiteBelowNodes, cmd/supervisor/bench_cluster_site_test.go),
# written to scripts/bench/by-hand/cluster-site.md (scripts/bench.sh copies both into
# docs/BENCHMARKS.md).
#
#   scripts/bench-cluster.sh            (or: make bench-cluster)
#   JOBS=50000 COUNT=1 SITE_PAGES=600 scripts/bench-cluster.sh [OUT [SITE_OUT]]
#   ONLY=site scripts/bench-cluster.sh      (the one site only; OUT is left as it is)
#
# JOBS is the targets each run renders (-benchtime JOBS x), COUNT the runs of each node count
# (`go test -count`: one after the other), SITE_PAGES the pages of the one site (5 a second a
# slot: 3000 take 5 minutes at its limit). The database runs on a throwaway PostgreSQL cluster started for
# the run (scripts/pg-test.sh: fsync off, synchronous_commit on), or on FRESHQ_TEST_PG_DSN's server
# when that is set; every run gets a fresh database of it. The machine is shared: the load average
# is written with the table, and figures from a loaded run are low.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-200000}
COUNT=${COUNT:-2}
SITE_PAGES=${SITE_PAGES:-3000}
out=${1:-scripts/bench/by-hand/cluster.md}
site_out=${2:-scripts/bench/by-hand/cluster-site.md}

if [ -z "${FRESHQ_TEST_PG_DSN:-}" ]; then
  exec ./scripts/pg-test.sh run "$0" "$@"
fi

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
pg=$(psql -XAtc 'SHOW server_version' "$FRESHQ_TEST_PG_DSN" 2>/dev/null || echo '?')
if [ "${ONLY:-}" != site ]; then
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cmd="go test -run '^\$' -bench 'QueueCluster' -benchtime ${JOBS}x -count $COUNT -timeout 120m ./cmd/supervisor/"
echo "$cmd" >&2
eval "$cmd" 2>&1 | tee "$tmp" >&2
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "## The queue on 1, 2 and 3 nodes (BenchmarkQueueCluster)"
  echo
  echo "Measured by \`make bench-cluster\` (scripts/bench-cluster.sh) on $(date -u +%Y-%m-%d), $(nproc) cores,"
  echo "PostgreSQL $pg on the same machine; load average $load_before before and $load_after after."
  echo "Each node is a real supervisor with worker 0 and one render worker (16 renders in flight, the"
  echo "\`sim\` renderer at zero latency), all on one database; $JOBS targets a run, made due at once"
  echo "after the nodes have divided the shards among them, timed until the nodes together have"
  echo "acknowledged every result. CPU per job: every node's processes (nodes) and the database"
  echo "server's (pg). min node: the smallest node's share of the results (an even split is 100/k %)."
  echo "Every node and the database share these $(nproc) cores, so more nodes here measure the cost of"
  echo "the cluster's coordination, not the capacity of more machines."
  echo
  echo "\`\`\`"
  echo "$cmd"
  echo "\`\`\`"
  echo
  echo "| nodes | run | jobs/s | CPU µs/job: nodes | pg | total | min node | ready |"
  echo "|---|---|---|---|---|---|---|---|"
  # BenchmarkQueueCluster/nodes=2-2  200000  40000 ns/op  5000 jobs/s  60.1 cpu-us/job ...
  awk '
    $1 ~ /^BenchmarkQueueCluster\/nodes=/ && $2 > 1 {
      k = $1; sub(/.*nodes=/, "", k); sub(/-[0-9]+$/, "", k)
      run[k]++
      js = cpu = pg = share = ready = "-"
      for (i = 3; i <= NF; i++) {
        if ($i == "jobs/s") js = $(i-1)
        if ($i == "cpu-us/job") cpu = $(i-1)
        if ($i == "pg-cpu-us/job") pg = $(i-1)
        if ($i == "min-node-%") share = $(i-1)
        if ($i == "ready-%") ready = $(i-1)
      }
      printf "| %s | %d | %.0f | %.1f | %.1f | %.1f | %.0f %% | %.0f %% |\n", k, run[k], js, cpu, pg, cpu + pg, share, ready
    }' "$tmp"
} >"$out"
echo "wrote $out" >&2
cat "$out"
grep -q '^BenchmarkQueueCluster/nodes=3' "$tmp"
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cmd="go test -run '^\$' -bench 'ClusterSiteBelowNodes' -benchtime ${SITE_PAGES}x -count $COUNT -timeout 120m ./cmd/supervisor/"
echo "$cmd" >&2
eval "$cmd" 2>&1 | tee "$tmp" >&2
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "## One site whose limit is below the node count (BenchmarkClusterSiteBelowNodes)"
  echo
  echo "Measured by \`make bench-cluster\` (scripts/bench-cluster.sh) on $(date -u +%Y-%m-%d), $(nproc) cores,"
  echo "PostgreSQL $pg on the same machine; load average $load_before before and $load_after after."
  echo "Three real nodes on one database at the defaults (\`cluster.lease_ttl\` 10 s, \`render.timeout\`"
  echo "60 s), \`render.hosts.max_concurrency: 2\`, the \`http\` renderer on a local origin that answers"
  echo "each request in 200 ms; $SITE_PAGES pages of the site posted through one node once every node"
  echo "counts three live nodes. Measured at the origin, from the first request to the last answer:"
  echo "pages/s; a slot's render rate (pages ÷ the seconds the origin spent answering them); of the"
  echo "limit, pages/s ÷ (limit × render rate), the origin's mean requests in flight ÷ the limit, which"
  echo "must be at least 95 %; the most requests at once, which must never exceed the limit (2)."
  echo
  echo "\`\`\`"
  echo "$cmd"
  echo "\`\`\`"
  echo
  echo "| run | pages/s | slot renders/s | of the limit (≥ 95 %) | most at once (≤ 2) |"
  echo "|---|---|---|---|---|"
  # BenchmarkClusterSiteBelowNodes-2  3000  ... ns/op  9.8 limit-% ...
  awk '
    $1 ~ /^BenchmarkClusterSiteBelowNodes/ && $2 > 1 {
      run++
      ps = rate = lim = most = "-"
      for (i = 3; i <= NF; i++) {
        if ($i == "pages/s") ps = $(i-1)
        if ($i == "slot-renders/s") rate = $(i-1)
        if ($i == "limit-%") lim = $(i-1)
        if ($i == "max-at-once") most = $(i-1)
      }
      printf "| %d | %.2f | %.2f | %.1f %% | %d |\n", run, ps, rate, lim, most
    }' "$tmp"
} >"$site_out"
echo "wrote $site_out" >&2
cat "$site_out"
grep -q '^BenchmarkClusterSiteBelowNodes' "$tmp"
