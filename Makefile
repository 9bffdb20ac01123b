# oncekey — developer entry points.
#
#   make demo      run examples/ticketdesk on a Temporal dev server and Postgres (ARGS=... for flags)
#   make test      go vet + every test with the race detector (needs Postgres, Redis and the Temporal CLI)
#   make temporal  install the Temporal CLI used for dev servers (cached outside the clone)
#   make bench     benchmarks against their baselines
#   make faults    fault-injection suite

SHELL := /bin/bash
GO ?= go

TEMPORAL_VERSION := v1.5.1
TEMPORAL_DIR     := $(HOME)/.cache/oncekey/temporal-$(TEMPORAL_VERSION)
TEMPORAL_BIN     := $(TEMPORAL_DIR)/temporal

# Packages run one or two at a time: each Temporal test binary starts its own dev server, and a
# 2-core machine starves if several run at once.
TEST_PARALLEL ?= 2
TEST_TIMEOUT  ?= 40m

export ONCEKEY_TEMPORAL_BIN ?= $(TEMPORAL_BIN)

.PHONY: demo test temporal bench pgbench faults vet

# Flags for the demo program, e.g. make demo ARGS="-seed 7 -manual".
ARGS ?=

demo: temporal
	$(GO) run ./examples/ticketdesk $(ARGS)

# The two tests that stop and start the local Postgres run last, one at a time, so they cannot
# disturb the packages running in parallel before them.
PG_RESTART_TESTS := ^(TestSurvivesPostgresRestart|TestPostgresRestart)$$

# Nested modules (their own go.mod, so their dependencies stay out of the core module): vetted
# and tested like the root, each from its own directory. Add a new one to the list.
NESTED_MODULES := redisstore

test: temporal vet
	$(GO) test -race -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./...
	@set -e; for m in $(NESTED_MODULES); do \
		echo "test: module $$m"; \
		(cd $$m && $(GO) test -race -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./...); \
	done
	ONCEKEY_TEST_PG_RESTART=1 $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) \
		-run '$(PG_RESTART_TESTS)' ./pgstore/ ./faults/

vet:
	$(GO) vet ./...
	@set -e; for m in $(NESTED_MODULES); do (cd $$m && $(GO) vet ./...); done

temporal: $(TEMPORAL_BIN)

$(TEMPORAL_BIN):
	@echo "installing Temporal CLI $(TEMPORAL_VERSION) into $(TEMPORAL_DIR) (one time, takes a few minutes)"
	mkdir -p $(TEMPORAL_DIR)
	GOBIN=$(TEMPORAL_DIR) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

# Every figure is measured against its baseline in the same run and printed as one BENCH line
# (format in docs/benchmarks.md). Raw benchmark output goes to bench.log.
BENCH_LOG ?= bench.log

bench: temporal pgbench
	@: > $(BENCH_LOG)
	@echo "bench: canonical encoding vs gowebpki/jcs" >&2
	@$(GO) test -run='^$$' -bench='^BenchmarkTransform$$' -benchmem -count=5 ./canonical/ \
		| $(GO) run ./internal/benchfmt -baseline-is=gowebpki/jcs 2>>$(BENCH_LOG)
	@echo "bench: store vs pgbench on the same SQL, with the pgx floor beside them (about 7 minutes)" >&2
	@$(GO) run ./pgstore/internal/benchcmd -duration 3s -rounds 7 -floor 2>>$(BENCH_LOG)
	@grep "pgx floor:" $(BENCH_LOG) >&2 || true
	@echo "bench: 500 Effectful workflows with and without oncekey on a dev server" >&2
	@ONCEKEY_BENCH=1 $(GO) test -run='^TestBenchE2EEffectful$$' -count=1 -v ./worker/ 2>>$(BENCH_LOG) \
		| tee -a $(BENCH_LOG) | grep '^BENCH'

pgbench:
	@command -v pgbench >/dev/null || { echo "installing pgbench (postgresql-client)"; \
		apt-get update -qq && apt-get install -y -qq postgresql-client postgresql-contrib >/dev/null; }

faults: temporal
	$(GO) run ./faults/cmd/faults $(FAULTS_ARGS)
