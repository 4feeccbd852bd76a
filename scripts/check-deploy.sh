#!/usr/bin/env bash
# Checks what an operator deploys: the systemd units (the service and its two sockets) pass
# `systemd-analyze verify` without a warning, and a running
# supervisor's /metrics passes `promtool check metrics` and exposes the core metric names docs/METRICS.md's
# table promises as part of the API. Needs systemd-analyze and promtool (Debian:
# systemd, prometheus).
set -euo pipefail
cd "$(dirname "$0")/.."

make build >/dev/null
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
  rm -f "/dev/shm/freshq-check-$$.seg"
}
trap cleanup EXIT

# systemd-analyze checks that ExecStart exists, so verify a copy that points at the built binary;
# the socket units are verified with it (their Service= names it). verify only warns about an
# unknown key: any output fails the check.
sed "s#/usr/local/bin/freshq-supervisor#$PWD/bin/freshq-supervisor#" deploy/freshq.service >"$tmp/freshq.service"
cp deploy/freshq-admin.socket deploy/freshq-crawler.socket "$tmp/"
(cd "$tmp" && systemd-analyze verify freshq.service freshq-admin.socket freshq-crawler.socket) >"$tmp/verify.txt" 2>&1 || { cat "$tmp/verify.txt"; exit 1; }
if [ -s "$tmp/verify.txt" ]; then cat "$tmp/verify.txt"; echo "systemd-analyze verify warned"; exit 1; fi
echo "deploy/freshq.service, freshq-admin.socket, freshq-crawler.socket: systemd-analyze verify passed"

port=$(( 20000 + $$ % 20000 ))
cat >"$tmp/freshq.yaml" <<YAML
data_dir: $tmp/data
listen: 127.0.0.1:$port
workers: 2
shm: {path: /dev/shm/freshq-check-$$.seg}
queue: {ready: {sweep_interval: 1s}}
render: {renderer: sim}
YAML
./bin/freshq-supervisor --config "$tmp/freshq.yaml" 2>"$tmp/log" &
pid=$!
for _ in $(seq 1 300); do
  if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt"
promtool check metrics <"$tmp/metrics.txt"
missing=0
for name in freshq_claim_granted_total freshq_ready_sweep_seconds freshq_ready_published \
            freshq_ready_cadence_total freshq_backlog freshq_lateness_ratio freshq_render_total \
            freshq_render_seconds freshq_lease_refused_total freshq_floor_timestamp_seconds freshq_floor_pinned_seconds \
            freshq_below_floor freshq_worker_restarts_total; do
  if ! grep -q "^$name[{ _]" "$tmp/metrics.txt"; then echo "missing metric: $name"; missing=1; fi
done
[ "$missing" = 0 ]
echo "/metrics: promtool check metrics passed; every documented metric name is exposed"
