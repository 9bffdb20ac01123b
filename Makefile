# oncekey — developer entry points.
#
#   make demo      run examples/ticketdesk on a Temporal dev server and Postgres (ARGS=... for flags)
#   make test      go vet, staticcheck, the docs check and every test with the race detector
#                  (needs Postgres, Redis and the Temporal CLI)
#   make lint      go vet and staticcheck only
#   make docs      the docs check only (links, make targets, CLI flags, Go code blocks)
#   make temporal  build the Temporal binary of the dev servers: CLI v1.9.1's dev server, CLI v1.5.1's
#                  client commands (cached outside the clone; docs/compatibility.md)
#   make bench     benchmarks against their baselines
#   make faults    fault-injection suite

SHELL := /bin/bash
GO ?= go

# The Temporal binary the tests, the demo and the docs run (docs/compatibility.md): `server
# start-dev` is the dev server of Temporal CLI $(TEMPORAL_SERVER_CLI) (Temporal server v1.32.0, standalone
# activities on), every other subcommand the full CLI $(TEMPORAL_CLI_VERSION). The full v1.9.1 CLI cannot be
# built from the module proxy (its go.mod replaces the nested module cliext with a directory its
# zip leaves out); its dev server does not need cliext. Changing either version, or
# internal/dev/devserver/testdata/temporal/main.go, means a new TEMPORAL_DIR name (and
# devserver.Binary's) so no stale build is reused.
TEMPORAL_SERVER_CLI  := v1.9.1
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL_DIR         := $(HOME)/.cache/oncekey/temporal-devserver-$(TEMPORAL_SERVER_CLI)-cli-$(TEMPORAL_CLI_VERSION)
TEMPORAL_BIN         := $(TEMPORAL_DIR)/temporal

# Packages run one or two at a time: each Temporal test binary starts its own dev server, and a
# 2-core machine starves if several run at once.
TEST_PARALLEL ?= 2
TEST_TIMEOUT  ?= 40m

export ONCEKEY_TEMPORAL_BIN ?= $(TEMPORAL_BIN)

# staticcheck, pinned; `go run` builds it into the module cache, nothing to install.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: demo test temporal bench bench-deps pgbench faults faults-deps vet lint staticcheck docs mockcheck

# Flags for the demo program, e.g. make demo ARGS="-seed 7 -manual".
ARGS ?=

# The demo is a module of its own (examples/ticketdesk/go.mod: openai-go and the MCP go-sdk stay
# out of the core module); it is built there and run from here, so -requests and -out paths are
# relative to the repository.
DEMO_BIN := $(HOME)/.cache/oncekey/ticketdesk

demo: temporal
	$(GO) build -C examples/ticketdesk -o $(DEMO_BIN) .
	$(DEMO_BIN) $(ARGS)

# Nested modules (their own go.mod, so their dependencies stay out of the core module): vetted
# and tested like the root, each from its own directory. Add a new one to the list. cmd/oncekey
# is one because the CLI links redisstore (go-redis) as well as pgstore.
NESTED_MODULES := redisstore oncekeyotel examples/ticketdesk examples/agentloop adapters cmd/oncekey

# A test whose service is missing (Postgres, Redis, Temporal, chromium, initdb) skips, which the
# plain go test output does not show: each skip notes its reason in ONCEKEY_TEST_NOTES, printed
# at the end, pass or fail. With CI set such a test fails instead.
test: temporal lint mockcheck
	@notes=$$(mktemp); trap 'rm -f "$$notes"' EXIT; export ONCEKEY_TEST_NOTES="$$notes"; status=0; \
	echo "$(GO) test -race -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./..."; \
	$(GO) test -race -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./... || status=1; \
	for m in $(NESTED_MODULES); do \
		echo "test: module $$m"; \
		(cd $$m && $(GO) test -race -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./...) || status=1; \
	done; \
	if [ -s "$$notes" ]; then \
		echo "test: tests skipped for a missing service (count, then why; CI=1 makes them fail):"; \
		sort "$$notes" | uniq -c | sort -rn; \
	else \
		echo "test: no test skipped for a missing service"; \
	fi; \
	exit $$status

vet:
	$(GO) vet ./...
	@set -e; for m in $(NESTED_MODULES); do (cd $$m && $(GO) vet ./...); done

lint: vet staticcheck

# The generated gomock mocks (package oncekeystore/storemock) must be current with the store contract.
MOCKGEN := $(GO) run go.uber.org/mock/mockgen@v0.6.0
mockcheck:
	@$(MOCKGEN) -source=oncekeystore/store.go -package=storemock -mock_names=Store=Store -write_source_comment=false \
		-write_command_comment=false -write_package_comment=false | diff -u oncekeystore/storemock/store.go - || \
		{ echo "oncekeystore/storemock/store.go is not current with oncekeystore/store.go: run go generate ./oncekeystore/storemock and commit it"; exit 1; }
	@$(MOCKGEN) -source=oncekeystore/approval.go -package=storemock -mock_names=ApprovalStore=ApprovalStore -write_source_comment=false \
		-write_command_comment=false -write_package_comment=false | diff -u oncekeystore/storemock/approvalstore.go - || \
		{ echo "oncekeystore/storemock/approvalstore.go is not current with oncekeystore/approval.go: run go generate ./oncekeystore/storemock and commit it"; exit 1; }

staticcheck:
	@echo "staticcheck $(STATICCHECK_VERSION) ./... $(NESTED_MODULES)"; ok=true; $(STATICCHECK) ./... || ok=false; \
	for m in $(NESTED_MODULES); do (cd $$m && $(STATICCHECK) ./...) || ok=false; done; \
	$$ok || { echo; \
		echo "staticcheck found the problems above. Run it locally with: make staticcheck"; \
		echo "  (or: go run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./path/to/pkg/)"; \
		echo "Fix them; for a deliberate exception, put //lint:ignore <CHECK> <why> on the line before."; \
		exit 1; }

# The docs check: the Markdown's links and #anchors, the make targets and oncekey commands and
# flags it names, its Go code blocks as excerpts of compiled files, and docs/agent-loops.md's
# table of model texts against result.go's. `make test` runs it too.
docs:
	$(GO) test -count=1 -run '^(TestRepositoryDocs|TestModelTextsDocumented)$$' . ./internal/testing/docscheck/
	$(GO) test -C cmd/oncekey -count=1 -run '^TestDocsNameRealCommands$$' .

temporal: $(TEMPORAL_BIN)

# The dev server is built in a scratch copy of the CLI $(TEMPORAL_SERVER_CLI) module (the only place its
# internal/devserver package may be imported), with an empty stand-in for cliext so the module
# graph loads; nothing built there imports cliext.
$(TEMPORAL_BIN):
	@echo "building the Temporal dev server of CLI $(TEMPORAL_SERVER_CLI) and installing CLI $(TEMPORAL_CLI_VERSION) into $(TEMPORAL_DIR) (one time, takes several minutes)"
	mkdir -p $(TEMPORAL_DIR)
	GOBIN=$(TEMPORAL_DIR)/cli-$(TEMPORAL_CLI_VERSION) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)
	@set -eo pipefail; main=$(CURDIR)/internal/dev/devserver/testdata/temporal/main.go; \
	src=$$($(GO) mod download -json github.com/temporalio/cli@$(TEMPORAL_SERVER_CLI) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$src" || { echo "make temporal: go mod download github.com/temporalio/cli@$(TEMPORAL_SERVER_CLI) gave no directory"; exit 1; }; \
	scratch=$$(mktemp -d); trap 'chmod -R u+w "$$scratch"; rm -rf "$$scratch"' EXIT; \
	cp -R "$$src/." "$$scratch"; chmod -R u+w "$$scratch"; \
	mkdir -p "$$scratch/cliext" "$$scratch/cmd/oncekey-temporal"; \
	printf 'module github.com/temporalio/cli/cliext\n\ngo 1.25\n' > "$$scratch/cliext/go.mod"; \
	cp "$$main" "$$scratch/cmd/oncekey-temporal/main.go"; \
	echo "go build ./cmd/oncekey-temporal (in a copy of github.com/temporalio/cli@$(TEMPORAL_SERVER_CLI))"; \
	(cd "$$scratch" && $(GO) build -o $(TEMPORAL_BIN).tmp ./cmd/oncekey-temporal); \
	mv $(TEMPORAL_BIN).tmp $(TEMPORAL_BIN)

# Every figure is measured against its baseline in the same run and printed as one BENCH line
# (format in docs/benchmarks.md). Raw benchmark output goes to bench.log.
BENCH_LOG ?= bench.log

# The pinned store figures run the server (a private Postgres, a private redis-server) on CPU
# BENCH_SERVER_CPU and the clients (ours, the floors, pgbench) on BENCH_CLIENT_CPU, so a ratio
# compares what each client asks of the server. The shared-core figures before them are
# informational (baseline_is ends in _shared_cores_informational).
BENCH_SERVER_CPU ?= 0
BENCH_CLIENT_CPU ?= 1

bench: temporal bench-deps
	@: > $(BENCH_LOG)
	@# First, while the main cluster is quiet: the store stages after it write gigabytes of WAL
	@# (the purge alone 2,000,000 rows), and the checkpoints that follow them slow every commit.
	@echo "bench: 600 Effectful workflows a side, with and without oncekey, on a dev server (about 2 minutes)" >&2
	@ONCEKEY_BENCH=1 $(GO) test -run='^TestBenchE2EEffectful$$' -count=1 -v ./internal/systemtest/ 2>>$(BENCH_LOG) \
		| tee -a $(BENCH_LOG) | grep '^BENCH'
	@echo "bench: canonical encoding vs gowebpki/jcs" >&2
	@$(GO) test -run='^$$' -bench='^BenchmarkTransform$$' -benchmem -count=5 ./canonical/ \
		| $(GO) run ./internal/dev/benchfmt -baseline-is=gowebpki/jcs 2>>$(BENCH_LOG)
	@set -eo pipefail; bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; \
	$(GO) build -o "$$bin/pg-store" ./pgstore/internal/benchcmd; \
	(cd redisstore && $(GO) build -o "$$bin/redis-store" ./internal/benchcmd); \
	echo "bench: store vs pgbench, a private Postgres on CPU $(BENCH_SERVER_CPU), clients on CPU $(BENCH_CLIENT_CPU) (about 5 minutes)" >&2; \
	taskset -c $(BENCH_CLIENT_CPU) "$$bin/pg-store" -pinned-server-cpu $(BENCH_SERVER_CPU) -duration 3s -rounds 5 \
		-only '^(claim_complete|replay|transactional)_c' 2>>$(BENCH_LOG) | tee "$$bin/pg.txt"; \
	grep -h "pgx floor:\|worker CPU per claim\|as in an activity" $(BENCH_LOG) | tail -n 7 >&2 || true; \
	pgreplay=$$(sed -n 's/^BENCH name=replay_pinned_c8 unit=ops\/s ours=\([0-9.]*\) .*/\1/p' "$$bin/pg.txt"); \
	echo "bench: redisstore vs the same scripts on bare go-redis, a private redis-server on CPU $(BENCH_SERVER_CPU), clients on CPU $(BENCH_CLIENT_CPU) (about 3 minutes)" >&2; \
	taskset -c $(BENCH_CLIENT_CPU) "$$bin/redis-store" -server-cpu $(BENCH_SERVER_CPU) -duration 3s -rounds 5 \
		-pg-replay "$${pgreplay:-0}" 2>>$(BENCH_LOG)
	@echo "bench: store vs pgbench on the same SQL, sharing the machine's cores with the server (informational), with the pgx floor beside them (about 7 minutes)" >&2
	@$(GO) run ./pgstore/internal/benchcmd -duration 3s -rounds 7 -floor -only '^(claim_complete|replay|transactional)' 2>>$(BENCH_LOG)
	@grep "pgx floor:" $(BENCH_LOG) | tail -n 4 >&2 || true
	@echo "bench: Purge of 1,000,000 records vs one DELETE of them, and claim p99 while it runs vs on the idle table (about 3 minutes)" >&2
	@set -o pipefail; $(GO) run ./pgstore/internal/benchcmd -only '^purge_1m' 2>>$(BENCH_LOG) | awk '{ print } \
		/^BENCH name=purge_1m / { split($$6, a, "="); printf "  goal: speedup >= 0.33 (a third of one DELETE'"'"'s rate): %s\n", (a[2]+0 >= 0.33 ? "met" : "NOT met") } \
		/^BENCH name=purge_1m_claim_p99 / { split($$6, a, "="); printf "  goal: speedup >= 0.667 (p99 at most 1.5 x idle): %s\n", (a[2]+0 >= 0.667 ? "met" : "NOT met") }'

# What make bench needs beyond Go: pgbench, taskset, Postgres's initdb (for the private
# instance) and redis-server, installed with apt-get when missing.
bench-deps:
	@pkgs=""; \
	command -v pgbench >/dev/null || pkgs="$$pkgs postgresql-client postgresql-contrib"; \
	command -v taskset >/dev/null || pkgs="$$pkgs util-linux"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	command -v redis-server >/dev/null || pkgs="$$pkgs redis-server"; \
	if [ -n "$$pkgs" ]; then echo "installing$$pkgs"; apt-get update -qq && apt-get install -y -qq $$pkgs >/dev/null; fi

# Kept for scripts that install pgbench alone.
pgbench: bench-deps

# What the failover rows of make faults need, installed when missing (Debian, as root): the
# Postgres server's binaries (initdb, pg_basebackup), patroni and etcd-server (row
# pg_failover_patroni), redis-server and redis-sentinel; and pgbouncer, which the store's tests
# through a pooler start.
faults-deps:
	@pkgs=""; \
	ls /usr/lib/postgresql/*/bin/pg_basebackup >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	command -v patroni >/dev/null || pkgs="$$pkgs patroni"; \
	command -v etcd >/dev/null || pkgs="$$pkgs etcd-server"; \
	command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || pkgs="$$pkgs pgbouncer"; \
	command -v redis-server >/dev/null || pkgs="$$pkgs redis-server"; \
	command -v redis-sentinel >/dev/null || pkgs="$$pkgs redis-sentinel"; \
	if [ -n "$$pkgs" ]; then echo "installing$$pkgs"; apt-get update -qq && apt-get install -y -qq $$pkgs >/dev/null; fi

faults: temporal faults-deps
	$(GO) run ./internal/faults/cmd/faults $(FAULTS_ARGS)
