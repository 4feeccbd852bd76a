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
set -euo pipefail
cd "$(dirname "$0")/.."
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
