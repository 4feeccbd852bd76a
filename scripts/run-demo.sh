#!/usr/bin/env bash
# `make run`: starts freshq on examples/freshq.yaml (Badger under ./data, sim renderer, no
# network), loads the demo corpus through the API, and prints a progress line every 2 s.
# Ctrl-C stops it cleanly: the render workers finish their renders and deliver their results,
# then worker 0 commits and closes Badger (see docs/OPERATING.md). It says how long that took and
# whether anything was dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${CONFIG:-examples/freshq.yaml}
corpus=${CORPUS:-examples/demo-targets.ndjson}
addr=$(awk '/^listen:/ {print $2}' "$config")

log=data/freshq.log
from=$(( $(stat -c %s "$log" 2>/dev/null || echo 0) + 1 ))
./bin/freshq-supervisor --config "$config" 2>>"$log" &
pid=$!
stop() {
  trap - INT TERM
  echo; echo "stopping freshq (pid $pid)…"
  local t0=$(date +%s%N) code=0
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" || code=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  # What this run logged about lost work: dropped or refused results, killed workers.
  local lost
  lost=$(tail -c +"$from" "$log" | grep -cE 'undeliverable|refused the results|"killed":[1-9]|killing it' || true)
  echo "stopped in $(( ms / 1000 )).$(( ms % 1000 / 100 ))s (exit $code); data kept in ./data, log in $log"
  if [ "$lost" != 0 ]; then echo "warning: $lost log lines about dropped results or killed workers; see $log"; fi
  exit "$code"
}
trap stop INT TERM

for _ in $(seq 1 300); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "freshq did not start; see data/freshq.log"; tail -5 data/freshq.log; exit 1; }
  sleep 0.2
done
echo "freshq is up: API and /metrics at http://$addr  (GET /v1/queue, POST /v1/targets, /metrics)"
curl -fsS -X POST --data-binary @"$corpus" "http://$addr/v1/targets" | sed 's/^/loaded demo corpus: /'
echo "renders | backlog by lane (urgent submitted discovered cold) | grants ready/index | worst lateness at grant by lane (≤ ×cadence)"
while kill -0 "$pid" 2>/dev/null; do
  curl -fsS "http://$addr/metrics" 2>/dev/null | awk '
    /^freshq_render_total/ { renders += $2 }
    /^freshq_backlog\{/ { match($0, /lane="[a-z]+"/); l = substr($0, RSTART+6, RLENGTH-7); backlog[l] = $2 }
    /^freshq_claim_granted_total/ { if ($0 ~ /ready/) ready = $2; else index_ = $2 }
    /^freshq_lateness_ratio_count/ { match($0, /lane="[a-z]+"/); l = substr($0, RSTART+6, RLENGTH-7); total[l] = $2 }
    /^freshq_lateness_ratio_bucket/ { match($0, /lane="[a-z]+"/); l = substr($0, RSTART+6, RLENGTH-7)
      match($0, /le="[^"]+"/); le = substr($0, RSTART+4, RLENGTH-5); n = ++nb[l]; les[l, n] = le; cnt[l, n] = $2 }
    END {
      split("urgent submitted discovered cold", lanes, " ")
      worst = ""
      for (i = 1; i <= 4; i++) {
        l = lanes[i]; w = "-"
        if (total[l] > 0) for (j = 1; j <= nb[l]; j++) if (cnt[l, j] >= total[l]) { w = les[l, j]; break }
        worst = worst sprintf(" %s:%s", l, w)
      }
      printf "%7d | %d %d %d %d | %d/%d |%s\n", renders, backlog["urgent"], backlog["submitted"], backlog["discovered"], backlog["cold"], ready, index_, worst
    }'
  sleep 2
done
wait "$pid"
