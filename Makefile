# freshq build entry points. Every target is what CI and the README use; nothing here is
# CI-only, so a developer can reproduce any CI step with the same command.

GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
PKGS      := ./...

.PHONY: build test race fuzz stress stress-steps bench bench-queue bench-serve bench-render bench-freshness bench-cluster sim golden lint run clean check-deploy

build:
	$(GO) build $(PKGS)
	@mkdir -p bin
	@for d in cmd/*/; do \
	  if ls $$d*.go >/dev/null 2>&1; then \
	    n=$$(basename $$d); out=bin/freshq-$$n; [ $$n = freshqctl ] && out=bin/freshqctl; \
	    $(GO) build -o $$out ./$$d || exit 1; \
	  fi; \
	done

# test is the one command the README and CI run: the race-enabled suite, then every fuzz
# target for a bounded time. The tests that need PostgreSQL share one throwaway cluster that
# scripts/pg-test.sh starts for the run and removes when it ends, pass or fail; a server named
# by FRESHQ_TEST_PG_DSN is used instead. (`make race` alone lets each test binary start its own,
# see testkit/pgtest.)
test:
	./scripts/pg-test.sh run $(MAKE) --no-print-directory race fuzz

# The second run builds shm with its step hooks (tag shmstep) so the interleaving model's
# tests in fuzz/ drive the real protocol one atomic step at a time; the third checks the clock
# that only test binaries carry (tag testclock, see internal/clock); the fourth runs the stores'
# tests of their protocol mutations, which exist only under that tag (store.Mutations); the
# fifth counts the policy's route matches an applied result costs (policy.RouteMatches, only
# under that tag too). The last runs shm's multi-process tests without the race detector too:
# its instrumentation slows every process down and hides interleavings that the uninstrumented
# build meets within a few runs.
# The first run's timeout is go test's bound on one package's binary: cmd/supervisor's
# end-to-end tests under the race detector take 9–10 minutes on a 2-core machine, past the
# default 10m (a bound on a hang, not a measure of speed).
race:
	$(GO) test -race -count=1 -timeout 30m $(PKGS)
	$(GO) test -race -count=1 -tags shmstep ./shm/ ./fuzz/
	$(GO) test -race -count=1 -tags testclock ./internal/clock/
	$(GO) test -race -count=1 -tags testclock -run '^TestMutation' ./store/...
	$(GO) test -race -count=1 -tags testclock -run '^TestApplyResolvesRouteOncePerResult$$' ./apply/
	$(GO) test -count=3 -run 'TestMultiProcess' ./shm/

# stress is the long run CI also makes after make test: every fuzz target for STRESS_FUZZTIME,
# the concurrent fencing history many times over, and the end-to-end stop, fencing and restart
# tests repeated against the real binaries, where a rare interleaving or a tight bound would show.
# The confirmed division's kill/pause and rolling-restart runs (about 100 s and 50 s each) and
# the seed pattern's latency (a measure, not an interleaving) run once, in make test: three more
# of each would put CI past its time.
# Like test, on one throwaway PostgreSQL unless FRESHQ_TEST_PG_DSN names one.
STRESS_FUZZTIME ?= 20s
STRESS_COUNT    ?= 3
stress:
	./scripts/pg-test.sh run $(MAKE) --no-print-directory stress-steps

stress-steps:
	$(GO) test -race -count=$$(( 4 * $(STRESS_COUNT) )) -run 'TestFenceHistory' ./fuzz/
	$(GO) test -race -timeout 30m -count=$(STRESS_COUNT) -run 'TestStopOn|TestCluster|TestEndToEndDuplicateResultIsFenced|TestEndToEndForgedLeaseSlotIsRefused|TestEndToEndRendersEverythingThroughKills|TestSecondSupervisorRefusesToStart' -skip 'TestClusterConfirm(KillAndPause|RollingRestart)|TestClusterSeedPattern' ./cmd/supervisor/
	FUZZTIME=$(STRESS_FUZZTIME) ./scripts/fuzz.sh

# Each fuzz target runs alone for FUZZTIME (see scripts/fuzz.sh for the one retry it allows).
fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

bench:
	BENCHTIME=$(BENCHTIME) ./scripts/bench.sh docs/BENCHMARKS.md

# The queue against River, the peer on PostgreSQL, in one run at 200k and 1M jobs (SIZES), on a
# throwaway PostgreSQL; prints one table (scripts/bench-queue.sh).
bench-queue:
	./scripts/bench-queue.sh

# The crawler listener against nginx serving the same pages from files, one table
# (scripts/bench-serve.sh; PAGES, PAGE_BYTES, SECONDS_EACH, CONNS size it).
bench-serve: build
	./scripts/bench-serve.sh

# The render farm: freshq's chrome renderer against the prerender server on the same pages and
# the same Chromium, in one run (scripts/bench-render.sh; PAGES, CONCURRENCY size it).
bench-render: build
	./scripts/bench-render.sh

# Freshness of content on the real processes: ready and freshness side by side on an origin
# whose pages change on a hidden schedule, one site and four, against the optimum for the same
# rates and capacity (scripts/bench-freshness.sh; MINUTES, FROM, HOSTS, SEED size it).
bench-freshness:
	./scripts/bench-freshness.sh

# The queue with 1, 2 and 3 nodes on one throwaway PostgreSQL, side by side in one run; writes
# the table of scripts/bench/by-hand/cluster.md; then one site whose limit is below the node
# count, scripts/bench/by-hand/cluster-site.md (scripts/bench-cluster.sh).
bench-cluster:
	./scripts/bench-cluster.sh

# The scheduling-quality report: every policy at 100, 75 and 50 % of demand on a
# 200,000-key corpus, deterministic for the seed. Rewrites docs/SIMULATION.md and docs/sim/;
# then the freshness comparison at full size (20,000 keys, as make sim-freshness) writes its
# section at the report's end, its chart and its rows (docs/sim/freshness.json). The tables
# before that section are simreport's alone.
SIMFLAGS ?= -keys 200000 -seed 1 -sweep-interval 5m -warmup 144h -window 96h -warmup-sweep-interval 15m -settle 48h
FRESHFLAGS ?= -keys 20000
sim:
	$(GO) run ./sim/simreport -out docs/SIMULATION.md -charts docs/sim $(SIMFLAGS)
	$(GO) run ./sim/freshreport -report docs/SIMULATION.md -charts docs/sim -out docs/sim/freshness.json $(FRESHFLAGS)

# The freshness comparison: index order, ready, production's freshness, the freshness scorer
# and the oracle on a corpus with ground truth (hidden change and request processes), at 25, 50 and 100 %
# capacity, on the standard and a held-out truth; writes a JSON list of rows (sim.FreshRow) to
# OUT (- for stdout), with MD=FILE its markdown table, and with REPORT=FILE its section of
# docs/SIMULATION.md into FILE (the chart into docs/sim); with ROWS=FILE it runs nothing and
# writes MD and REPORT from the rows of an earlier run's OUT. make sim writes a KEYS=20000 run
# into docs/SIMULATION.md.
KEYS ?= 20000
OUT  ?= -
.PHONY: sim-freshness
sim-freshness:
	$(GO) run ./sim/freshreport -keys $(KEYS) -out $(OUT) $(if $(MD),-md $(MD)) $(if $(REPORT),-report $(REPORT) -charts docs/sim) $(if $(ROWS),-rows $(ROWS))

# The golden tests compare the deterministic core with files under each package's testdata/
# (policy decisions, the selector, the simulator's table, the shm layout). After a deliberate
# change of behaviour, this rewrites them from the code; review the diff before committing it.
golden:
	$(GO) test -count=1 -run Golden ./policy/ ./sim/ ./shm/ -rewrite

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@command -v staticcheck >/dev/null 2>&1 || PATH="$(GOBIN):$$PATH"; \
	  PATH="$(GOBIN):$$PATH" staticcheck $(PKGS)

# The systemd unit passes systemd-analyze verify; a live /metrics passes promtool.
check-deploy:
	./scripts/check-deploy.sh

# The first thing a new user types: builds, starts freshq on examples/freshq.yaml with Badger under
# ./data and the sim renderer (no network), loads the demo corpus, prints progress. Ctrl-C stops it.
run: build
	@mkdir -p data
	./scripts/run-demo.sh

clean:
	rm -rf bin
