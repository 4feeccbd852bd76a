#!/usr/bin/env bash
# The queue against its peer, in one run on this machine: River (bench/river, River's library with
# a no-op worker and its defaults) and freshq's queue (BenchmarkQueueOverhead: real supervisor and
# workers, zero-latency sim renderer, every result committed) at each size in SIZES, then one table.
#
#   scripts/bench-queue.sh            (or: make bench-queue)
#   SIZES="200000" WORKERS=2 scripts/bench-queue.sh     (one size; freshq with 2 workers only)
#   CONSOLE_POLL=1 scripts/bench-queue.sh               (each freshq run twice: as above, then with a
#                                                        headless Chromium loading the console's
#                                                        overview every second; side by side)
#   CONSOLE_POLL="http 1" scripts/bench-queue.sh        (three times: without, with the overview's
#                                                        requests made without a browser, with one)
#
# River runs on a throwaway PostgreSQL cluster started for the run (scripts/pg-test.sh: fsync off,
# synchronous_commit on) and removed at the end, or on FRESHQ_TEST_PG_DSN's server when that is set.
# Figures: "work" is from the start of working (River: client start; freshq: the node's readiness)
# until every job has completed; "all" adds River's inserts (freshq seeds its store directly, which
# is not a queue insert, so it has none). CPU per job is the queue's processes' (River: the
# benchmark process; freshq: supervisor and workers) and the PostgreSQL server's (postmaster and
# its backends), over the work phase ("q" and "pg" in the table). The machine is shared: the load
# average is printed with the table, and figures from a loaded run are low.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"200000 1000000"}
WORKERS=${WORKERS:-} # a BenchmarkQueueOverhead workers=K to run alone; empty: every K it has
failed=0             # a failed step is reported, the table still printed, and the exit status 1

if [ -z "${FRESHQ_TEST_PG_DSN:-}" ]; then
  exec ./scripts/pg-test.sh run "$0" "$@"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rows=$tmp/rows # one line per result: system size work_jobs_s all_jobs_s proc_us server_us console_polls
# CONSOLE_POLL: the pollers of the console's overview, each a second run of every freshq size
# beside the run without: 1 (or browser) a headless Chromium reloading the overview every second
# (needs chromium), browser-nice the same browser at nice 19 (on the cores the queue leaves, as an
# operator's tab on another machine would be), http the same requests a second from Go's HTTP
# client, without a browser's CPU on the cores (BenchmarkQueueOverhead's FRESHQ_BENCH_CONSOLE_POLL). The console's cost is the
# difference, read against the run-to-run spread; http against browser tells the node's cost from
# the browser's. 0: none.
CONSOLE_POLL=${CONSOLE_POLL:-0}
[ "$CONSOLE_POLL" != 0 ] || CONSOLE_POLL=
for m in $CONSOLE_POLL; do
  case $m in 1 | browser | browser-nice | http) ;; *) echo "bench-queue: CONSOLE_POLL=$m: want 0, 1 (browser), browser-nice or http" >&2; exit 2 ;; esac
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
(cd bench/river && go build -o "$tmp/river-bench" .)

# field NAME: the number after "NAME": in the JSON line on stdin.
field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }

river() {
  local n=$1 j
  if ! j=$("$tmp/river-bench" -jobs "$n"); then
    echo "bench-queue: river at $n jobs failed" >&2; failed=1; return
  fi
  echo "$j" >&2
  printf 'river %s %s %s %s %s -\n' "$n" "$(field jobs_per_s_work <<<"$j")" "$(field jobs_per_s_all <<<"$j")" \
    "$(field cpu_process_us_per_job_work <<<"$j")" "$(field cpu_server_us_per_job_work <<<"$j")" >>"$rows"
}

# freshq BACKEND N [POLL] runs the queue benchmark on a store of N rows and adds one row per
# workers=K; with POLL (1, browser, browser-nice or http), that poller loads the console's overview every
# second throughout.
freshq() {
  local backend=$1 n=$2 poll=${3:-} out=$tmp/freshq-$1-$2${3:+-poll-$3}.txt
  local env=(FRESHQ_BENCH_CONSOLE_POLL=0) sys=freshq-$1
  if [ "$backend" = postgres ]; then
    env+=(FRESHQ_BENCH_STORE=postgres)
  fi
  if [ -n "$poll" ]; then
    env+=(FRESHQ_BENCH_CONSOLE_POLL="$poll") sys=$sys+console
    [ "$poll" != http ] || sys=$sys-http
    [ "$poll" != browser-nice ] || sys=$sys-nice
  fi
  local re=QueueOverhead
  [ -z "$WORKERS" ] || re="QueueOverhead/workers=$WORKERS\$"
  if ! env "${env[@]}" go test -run '^$' -bench "$re" -benchtime "${n}x" -timeout 60m ./cmd/supervisor/ 2>&1 | tee "$out" >&2; then
    echo "bench-queue: freshq on $backend at $n rows failed" >&2; failed=1
  fi
  # BenchmarkQueueOverhead/workers=2-2  200000  25000 ns/op  40000 jobs/s  50.1 cpu-us/job ...
  awk -v sys="$sys" -v n="$n" '
    $1 ~ /^BenchmarkQueueOverhead\/workers=/ && $2 == n {
      w = $1; sub(/.*workers=/, "", w); sub(/-[0-9]+$/, "", w)
      js = "-"; cpu = "-"; pg = (sys ~ /^freshq-badger/ ? "-" : "?"); polls = "-"; lms = ""
      for (i = 3; i <= NF; i++) {
        if ($i == "jobs/s") js = $(i-1)
        if ($i == "cpu-us/job") cpu = $(i-1)
        if ($i == "pg-cpu-us/job") pg = $(i-1)
        if ($i == "console-polls") polls = $(i-1)
        if ($i == "console-load-ms") lms = $(i-1)
      }
      if (polls != "-") polls = sprintf("%.0f", polls)
      if (lms != "") polls = polls "(" sprintf("%.0f", lms) "ms)" # one field: no space
      print sys "(w=" w ")", n, js, "-", cpu, pg, polls
    }' "$out" >>"$rows"
}

# freshq on PostgreSQL: BenchmarkQueueOverhead with FRESHQ_BENCH_STORE=postgres runs the node on a
# fresh database of the same server and reports the server's CPU per job (pg-cpu-us/job).
# FRESHQ_ON_POSTGRES=0 leaves it out.
FRESHQ_ON_POSTGRES=${FRESHQ_ON_POSTGRES:-1}

for n in $SIZES; do
  river "$n"
  freshq badger "$n"
  for m in $CONSOLE_POLL; do freshq badger "$n" "$m"; done
  if [ "$FRESHQ_ON_POSTGRES" = 1 ]; then
    freshq postgres "$n"
    for m in $CONSOLE_POLL; do freshq postgres "$n" "$m"; done
  fi
done
load=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "queue benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average after: $load"
echo "PostgreSQL: $(psql -XAtc 'SHOW server_version' "$FRESHQ_TEST_PG_DSN" 2>/dev/null || echo '?'), synchronous_commit $(psql -XAtc 'SHOW synchronous_commit' "$FRESHQ_TEST_PG_DSN" 2>/dev/null || echo '?')"
[ "$FRESHQ_ON_POSTGRES" = 1 ] || echo "freshq on PostgreSQL: left out (FRESHQ_ON_POSTGRES=0)"
[ -z "$CONSOLE_POLL" ] || echo "+console: the same run with a headless Chromium loading the console's overview every second; +console-nice: the browser at nice 19; +console-http: the same requests from Go's HTTP client, no browser (console polls: the overview loads completed during the run, and their mean time)"
echo
# With a console poller the table has one more column, the console's loads during the run.
poll=0
[ -z "$CONSOLE_POLL" ] || poll=1
if [ "$poll" = 1 ]; then
  printf '| %-34s | %9s | %12s | %12s | %14s | %14s | %12s | %18s |\n' system rows "work jobs/s" "all jobs/s" "cpu us/job q" "cpu us/job pg" "cpu us/job" "console polls"
  printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' ------------------------------------ ----------- -------------- -------------- ---------------- ---------------- -------------- --------------------
else
  printf '| %-22s | %9s | %12s | %12s | %14s | %14s | %12s |\n' system rows "work jobs/s" "all jobs/s" "cpu us/job q" "cpu us/job pg" "cpu us/job"
  printf '|%s|%s|%s|%s|%s|%s|%s|\n' ------------------------ ----------- -------------- -------------- ---------------- ---------------- --------------
fi
awk -v poll="$poll" '{
  total = ($5 == "-" ? "-" : ($6 == "-" || $6 == "?" ? $5 : $5 + $6))
  cells = sprintf("| %9d | %12s | %12s | %14s | %14s | %12s |", $2,
    ($3 == "-" ? "-" : sprintf("%.0f", $3)), ($4 == "-" ? "-" : sprintf("%.0f", $4)),
    ($5 == "-" ? "-" : sprintf("%.1f", $5)), ($6 == "-" || $6 == "?" ? $6 : sprintf("%.1f", $6)),
    (total == "-" ? "-" : sprintf("%.1f", total)))
  if (poll == 1) printf "| %-34s %s %18s |\n", $1, cells, $7
  else printf "| %-22s %s\n", $1, cells
}' "$rows"
exit $failed
