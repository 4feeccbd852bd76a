#!/usr/bin/env bash
# The crawler listener against nginx serving the same pages from files, in one run on this
# machine (BenchmarkServe in cmd/supervisor): stored pages (gzipped, as worker 0 stores them;
# nginx serves the same .gz files with gzip_static), Zipf requests accepting gzip on 1 and 64
# keep-alive connections, the queue rendering meanwhile. Prints one table. The load generator is
# wrk (Debian's package wrk), run on the same cores as both servers.
#
#   scripts/bench-serve.sh                       (or: make bench-serve)
#   PAGES=1000000 SECONDS_EACH=30 scripts/bench-serve.sh   (the full size: ~6.3 GB for each copy, ~8 min to load here)
#   RENDERER=chrome CONNS=64 scripts/bench-serve.sh         (the queue rendering through Chromium meanwhile)
#
# PAGES (default 20000) pages of PAGE_BYTES (default 30000); SECONDS_EACH (default 10) per run;
# CONNS (default "1 64"); SWEEP the sweep interval (default 1s: a sweep a second over a due
# set of half the pages on one host, harsher than queue.ready.sweep_interval's 1m default);
# RENDERER the renderer of the queue meanwhile (default sim, 20 ms a page; chrome: Chromium at
# its derived concurrency rendering the due half of the pages from a local origin, a listing
# whose script fetches from a 100 ms API, all through the runs; needs chromium).
# The machine is shared: the load average is printed with the table, and figures from a
# loaded run are low for both servers.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "bench-serve: wrk is the load generator; install Debian's package wrk" >&2; exit 1; }
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "bench-serve: install Debian's package nginx" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
FRESHQ_BENCH_PAGES=${PAGES:-20000} FRESHQ_BENCH_PAGE_BYTES=${PAGE_BYTES:-30000} \
  FRESHQ_BENCH_SECONDS=${SECONDS_EACH:-10} FRESHQ_BENCH_CONNS=${CONNS:-"1 64"} FRESHQ_BENCH_SWEEP=${SWEEP:-1s} \
  FRESHQ_BENCH_RENDERER=${RENDERER:-sim} \
  go test -run '^$' -bench '^BenchmarkServe$' -benchtime 1x -timeout 120m ./cmd/supervisor/ >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
grep -o 'seeded .*' "$out" >&2 || true
grep -o 'rendering meanwhile with .*' "$out" || true
echo "| server | conns | requests/s | p50 ms | p99 ms | errors | renders meanwhile |"
echo "|---|---|---|---|---|---|---|"
grep -o '| [a-z]* | [0-9]* | .*|$' "$out"
