#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for a whole test or benchmark run, shared by every test binary
# through FRESHQ_TEST_PG_DSN (testkit/pgtest starts the same kind of cluster per binary when the
# variable is unset; keep the settings of the two in step).
#
#   pg-test.sh start          initdb + start a cluster in a fresh temp dir; prints the dir
#   pg-test.sh env DIR        prints FRESHQ_TEST_PG_DSN=<dsn> for the cluster in DIR
#   pg-test.sh pid DIR        prints the postmaster's pid
#   pg-test.sh stop DIR       stops the cluster (immediate) and removes DIR
#   pg-test.sh run CMD...     runs CMD with FRESHQ_TEST_PG_DSN set: to the variable's own value
#                             if it is already set, else to a cluster started for CMD and removed
#                             when CMD ends, however it ends (a trap; only SIGKILL escapes it)
#
# The cluster: the server's binaries from FRESHQ_TEST_PG_BINDIR, `pg_config --bindir` or the
# newest /usr/lib/postgresql/*/bin; run as nobody when this script runs as root (PostgreSQL
# refuses root); a unix socket in DIR and no TCP port (listen_addresses=''); fsync and
# full_page_writes off (a throwaway cluster need not survive a machine crash); synchronous_commit
# left on, so commits wait for their WAL write as in production. Every cluster has a directory of
# its own, so one left by a killed run cannot collide with the next.
set -euo pipefail

port=5432 # names the socket file only
settings=(-c "listen_addresses=" -c fsync=off -c full_page_writes=off -c max_connections=200)

bindir() {
  local d
  if [ -n "${FRESHQ_TEST_PG_BINDIR:-}" ]; then
    echo "$FRESHQ_TEST_PG_BINDIR"; return
  fi
  if d=$(pg_config --bindir 2>/dev/null) && [ -x "$d/initdb" ]; then
    echo "$d"; return
  fi
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then
    echo "$d"; return
  fi
  echo "pg-test.sh: no PostgreSQL server binaries (install Debian's postgresql, or set FRESHQ_TEST_PG_BINDIR)" >&2
  return 1
}

# as_server runs its arguments as the server's user.
as_server() {
  if [ "$(id -u)" = 0 ]; then
    setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- "$@"
  else
    "$@"
  fi
}

dsn() { echo "host=$1 port=$port user=postgres dbname=postgres sslmode=disable"; }

start() {
  local bin dir
  bin=$(bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/freshq-pgsh-XXXXXXXX")
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown nobody:"$(id -g nobody)" "$dir"
  if ! as_server "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2; rm -rf "$dir"; return 1
  fi
  local opts="-k $dir -p $port"
  for s in "${settings[@]}"; do
    [ "$s" = -c ] && continue
    opts+=" -c '$s'"
  done
  if ! as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -o "$opts" -w -t 60 start >/dev/null; then
    cat "$dir/log" >&2; rm -rf "$dir"; return 1
  fi
  echo "$dir"
}

stop() {
  local dir=$1
  [ -f "$dir/data/PG_VERSION" ] || { echo "pg-test.sh: $dir is not a cluster of this script" >&2; return 1; }
  as_server "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

run() {
  if [ -n "${FRESHQ_TEST_PG_DSN:-}" ]; then
    exec "$@"
  fi
  local rc=0
  run_dir=$(start) # global: the EXIT trap runs after this function has returned
  trap 'stop "$run_dir"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  export FRESHQ_TEST_PG_DSN
  FRESHQ_TEST_PG_DSN=$(dsn "$run_dir")
  echo "pg-test.sh: PostgreSQL for this run in $run_dir" >&2
  "$@" || rc=$?
  return $rc
}

cmd=${1:-}
shift || true
case $cmd in
  start) start ;;
  env) echo "FRESHQ_TEST_PG_DSN=$(dsn "${1:?DIR}")" ;;
  pid) head -n 1 "${1:?DIR}/data/postmaster.pid" ;;
  stop) stop "${1:?DIR}" ;;
  run) [ $# -gt 0 ] || { echo "usage: pg-test.sh run CMD..." >&2; exit 2; }; run "$@" ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
