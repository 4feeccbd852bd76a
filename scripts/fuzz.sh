#!/usr/bin/env bash
# Runs every Fuzz target in fuzz/ for FUZZTIME (default 10s) each; go test -fuzz takes one
# target at a time. The package builds with -tags shmstep so the interleaving model drives shm's
# real protocol.
#
# go1.26's fuzz coordinator can end a duration-based run with a spurious "context deadline
# exceeded" when a worker is slow to answer at the deadline (golang/go#75804, fixed in go1.27).
# Such a run found nothing: a real failure writes its input under testdata/fuzz. So a run that
# fails with that message and wrote no input is retried once; any other failure fails at once.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
# The list is taken first, so that a fuzz package that does not build fails the run instead of
# leaving the loop nothing to do.
targets=$(go test -tags shmstep -list '^Fuzz' ./fuzz/ | grep '^Fuzz') || { echo "fuzz: cannot list the targets of ./fuzz/" >&2; exit 1; }
[ -n "$targets" ] || { echo "fuzz: no fuzz targets in ./fuzz/" >&2; exit 1; }
for t in $targets; do
  for attempt in 1 2; do
    echo "fuzz $t ($fuzztime)"
    if out=$(go test -tags shmstep -run '^$' -fuzz "^$t\$" -fuzztime "$fuzztime" ./fuzz/ 2>&1); then
      # A run spent gathering the corpus's baseline coverage (a slow target on a loaded
      # machine) prints no execs line: it passed all the same.
      echo "$out" | grep -E 'execs:' | tail -1 || true
      echo "$out" | tail -1
      continue 2
    fi
    echo "$out" | tail -25
    if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
      echo "fuzz $t: spurious deadline at the end of the run, no input written (golang/go#75804); retrying once"
      continue
    fi
    exit 1
  done
done
