#!/usr/bin/env bash
# Freshness of content on the real processes (BenchmarkFreshness in cmd/supervisor): an origin
# whose pages change on a hidden Poisson schedule it records, a crawler at about 30 requests a
# second through the crawler listener, queue.policy ready and freshness side by side on the same
# seed, the one-site corpus and then the four-site one, in real time. For each corpus it prints
# a table (the ground-truth stale share, freshq's own, renders, renders to never-changing pages,
# the origin's full answers) and the line
#   <corpus>: stale share ready X freshness Y optimum Z
# where the optimum is the water-filling render rates over the pages' true rates for the
# capacity measured.
#
#   scripts/bench-freshness.sh              (or: make bench-freshness; about 13 minutes)
#   MINUTES=11 FROM=5 scripts/bench-freshness.sh
#
# MINUTES (default 6) is each run's length, FROM (default 2) the minute the figures are
# measured from; HOSTS (default "1 4") the corpora; SEED (default 1); STRETCH (default "2";
# "" for none) freshness.stretch_factor values, each a third node beside the two at the
# defaults, on the same origin schedule and crawler; PAGES, RATE size the
# corpus and the crawler (default: 2.6 × the capacity's renders a minute; 30 requests a second).
# The machine is shared: the load average is printed with the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
FRESHQ_BENCH_MINUTES=${MINUTES:-6} FRESHQ_BENCH_FROM=${FROM:-2} FRESHQ_BENCH_HOSTS=${HOSTS:-"1 4"} \
FRESHQ_BENCH_SEED=${SEED:-1} FRESHQ_BENCH_STRETCH=${STRETCH-2} FRESHQ_BENCH_PAGES=${PAGES:-} FRESHQ_BENCH_RATE=${RATE:-} \
  go test -run '^$' -bench '^BenchmarkFreshness$' -benchtime 1x -timeout 60m ./cmd/supervisor/ >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
grep -E '^\||^[^ ]+( sites| site)[:,]' "$out"
