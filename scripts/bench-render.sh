#!/usr/bin/env bash
# The render farm: freshq's chrome renderer against the prerender server (npm prerender, pinned
# in cmd/supervisor/testdata/bench-render, with its blockResources and removeScriptTags plugins,
# on Debian's Chromium), the same pages served locally, in one run on this machine
# (BenchmarkRenderFarm in cmd/supervisor). Prints one table and two ratios:
#   ratio good-pages-per-cpu-second freshq/prerender: Z
#   ratio good-pages-per-second-at-best-concurrency freshq/prerender: W
# (freshq at its defaults against the prerender server at the concurrency where it rendered
# most good pages a second).
#
#   scripts/bench-render.sh                 (or: make bench-render)
#   PAGES=16 CONCURRENCY="4 8 16 32" scripts/bench-render.sh
#
# PAGES (default 8) pages of each of the six kinds a run; CONCURRENCY (default "2 4 8 16") the
# sweep. It needs chromium, node and npm (Debian's packages chromium, nodejs, npm); npm installs
# the pinned packages into the benchmark's temp dir. The machine is shared: the load average is
# printed with the table, and figures from a loaded run are low for both.
#
#   scripts/bench-render.sh conditional     (what conditional GETs and change detection save)
#   MINUTES=11 FROM=5 RENDERER=chrome scripts/bench-render.sh conditional
#
# The conditional mode (BenchmarkConditional in cmd/supervisor) runs three nodes side by side on
# bench-freshness's change-schedule corpus (pages that change on a hidden schedule, half sending
# an ETag), the same crawler for each: the defaults (queue.policy freshness,
# freshness.conditional_every 10), freshness.conditional_every 1 (no conditional GET), and
# queue.policy ready with conditional_every 1 (neither). It prints one table (renders performed,
# renders avoided by a 304, CPU, the stale share as the crawler saw it) and two lines,
#   conditional: renders avoided X % ... stale share A % against B % with conditional_every 1
#   conditional and change estimate: renders performed Y % fewer than ready ...
# MINUTES (default 6) each run's length, FROM (default 2) the minute the figures are measured
# from, RENDERER (default http; chrome needs chromium), PAGES, RATE, SEED as bench-freshness.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = conditional ]; then
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  FRESHQ_BENCH_MINUTES=${MINUTES:-6} FRESHQ_BENCH_FROM=${FROM:-2} FRESHQ_BENCH_SEED=${SEED:-1} \
  FRESHQ_BENCH_RENDERER=${RENDERER:-http} FRESHQ_BENCH_PAGES=${PAGES:-} FRESHQ_BENCH_RATE=${RATE:-} \
    go test -run '^$' -bench '^BenchmarkConditional$' -benchtime 1x -timeout 60m ./cmd/supervisor/ >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  grep -E '^\||^conditional' "$out"
  exit 0
fi
for tool in chromium node npm; do
  command -v "$tool" >/dev/null || { echo "bench-render: $tool is needed (Debian's packages chromium, nodejs, npm)" >&2; exit 1; }
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
FRESHQ_BENCH_PAGES=${PAGES:-8} FRESHQ_BENCH_CONCURRENCY=${CONCURRENCY:-"2 4 8 16"} \
  go test -run '^$' -bench '^BenchmarkRenderFarm$' -benchtime 1x -timeout 120m ./cmd/supervisor/ >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
grep -E '^\||^\(|^prerender at|^at equal|^ratio ' "$out"
