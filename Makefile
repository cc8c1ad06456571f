# capgate — build, run and test.
#
#   make run    build capgate and its plugins and serve the demo config on
#               127.0.0.1:8080
#   make test   every test (unit, integration, real MCP clients, conformance),
#               and the tests of the bench module (bench/)
#   make bench  the hot path's Go benchmarks and capgate-bench (bench/)
#   make soak   TestSoak (host/e2e/soak_test.go, -tags soak): one host under
#               fixed-rate load at half its measured capacity for SOAK
#               (default 10m; CI runs SOAK=60s), a plugin killed with -9 every
#               minute (every 15s under 5m); fails on a lost acknowledged
#               write, an error outside a restart window or RSS growth of 10%
#               or more (25% in runs under 5m, which cannot tell a small creep
#               from warm-up); writes a markdown report to SOAK_REPORT. Not part of
#               `make test`, and not run with -race: it measures capacity.
#   make chaos  TestChaos (bench/chaos, -tags chaos): two replicas under steady
#               load while PostgreSQL, NATS and Redis (processes of its own,
#               each behind a fault proxy) restart, get 2 s of latency or are
#               cut off for 30 s; fails on a lost acknowledged write or a
#               recovery slower than 5 s; writes a markdown table to
#               CHAOS_REPORT. CHAOS_SHORT=1 holds each fault 5 s and runs five
#               of the nine; CHAOS_ONLY=regexp picks faults by name.
#
# Only Go is required. Node.js/npm, when present, add the TypeScript client
# and the MCP conformance suite to `make test` (CI always runs them).

GO       ?= go
BIN      ?= bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
# Every plugins/<name> with a main package is a product plugin, shipped as
# $(BIN)/capgate-plugin-<name> (the paths config/capgate.yaml names). Fixture
# plugins live elsewhere: in bench/ and under testdata/.
PLUGINS  := $(patsubst plugins/%/main.go,%,$(wildcard plugins/*/main.go))
# The main packages of the product: capgate and its plugins.
PRODUCT  := ./host/cmd/capgate $(addprefix ./plugins/,$(PLUGINS))
CONFIG   ?= config/capgate.yaml
FUZZTIME ?= 15s
# Extra flags for go test in `make test` (CI adds -json).
GOTESTFLAGS ?=
# Extra flags for capgate-bench (bench/cmd/capgate-bench), e.g.
# BENCHFLAGS="-rounds 3".
BENCHFLAGS ?=
# How long `make soak` soaks (a Go duration), and where it writes its report.
SOAK        ?= 10m
SOAK_REPORT ?= $(BIN)/soak-report.md
# Where `make chaos` writes its table; CHAOS_SHORT=1 for the quick run.
CHAOS_REPORT ?= $(BIN)/chaos-report.md
CHAOS_SHORT  ?=

# Generator versions for `make proto`, pinned so output is reproducible.
BUF_VERSION             := v1.75.0
PROTOC_GEN_GO_VERSION   := v1.36.12
PROTOC_GEN_GRPC_VERSION := v1.6.2

.PHONY: all build run test test-go e2e-deps soak chaos fuzz bench proto vet fmt check clean

all: build

# One go build for all of the product, so the compiler runs its packages in
# parallel; it names each binary after its directory, and the plugins are
# then renamed to what the host expects.
build:
	@mkdir -p $(BIN)
	@echo "==> Go modules: downloading what the build needs (the first time only: about 260 MB)"
	@$(GO) list -deps $(PRODUCT) >/dev/null
	@echo "==> building capgate and $(words $(PLUGINS)) plugins ($(PLUGINS)) into $(BIN)/ (the first build takes one to two minutes on 2 cores; later ones seconds)"
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(PRODUCT)
	@for p in $(PLUGINS); do mv -f $(BIN)/$$p $(BIN)/capgate-plugin-$$p; done

run: build
	@echo
	@echo "==> serving $(CONFIG); Ctrl-C stops it"
	@echo "capgate MCP endpoint: http://$${CAPGATE_LISTEN:-127.0.0.1:8080}/api/v1/mcp"
	@echo "demo tokens (Authorization: Bearer <token>):"
	@echo "  demo-alice    customer, scope action, user alice"
	@echo "  demo-bob      customer, scope action, user bob"
	@echo "  demo-reader   customer, scope read,   user alice"
	@echo "  demo-service  customer, scope action, no user"
	@echo "  demo-guest    guest,    scope read,   no user"
	@echo "  demo-admin    admin,    scope admin,  user ops"
	@echo "admin console: http://$${CAPGATE_LISTEN:-127.0.0.1:8080}/admin/ (sign in with demo-admin)"
	@echo
	$(BIN)/capgate serve -c $(CONFIG)

# The npm project pins the TypeScript SDK client, the conformance suite and
# Node 22; without npm those tests skip (and fail under CI=true).
e2e-deps:
	@if command -v npm >/dev/null 2>&1; then \
		cd host/e2e/js && { [ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] || \
			npm ci --no-audit --no-fund --loglevel=error; }; \
	else \
		echo "npm not found: the TypeScript client and conformance tests will be skipped"; \
	fi

# bench/ is a module of its own (the load tests and their fixtures, which
# need mcp-go): its tests run after the product's.
test: e2e-deps
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	$(GO) test -race -count=1 $(GOTESTFLAGS) ./...
	cd bench && $(GO) test -race -count=1 $(GOTESTFLAGS) ./...

# test-go is the Go tests alone, for a quick loop.
test-go:
	$(GO) test -race ./...
	cd bench && $(GO) test -race ./...

# The test's timeout is the soak plus 15 minutes for building, starting,
# measuring and checking: Go durations add up, so 10m15m is 25m.
soak:
	@mkdir -p $(dir $(SOAK_REPORT))
	CAPGATE_SOAK=$(SOAK) CAPGATE_SOAK_REPORT=$(abspath $(SOAK_REPORT)) \
		$(GO) test -tags soak -run '^TestSoak$$' -count=1 -v -timeout $(SOAK)15m ./host/e2e

# The chaos test drives the binaries make build made; it needs
# initdb/pg_ctl, nats-server and redis-server, and runs them on ports of
# its own.
chaos: build
	@mkdir -p $(dir $(CHAOS_REPORT))
	cd bench && CHAOS_BIN=$(abspath $(BIN)) CHAOS_REPORT=$(abspath $(CHAOS_REPORT)) CHAOS_SHORT=$(CHAOS_SHORT) \
		$(GO) test -tags chaos -run '^TestChaos$$' -count=1 -v -timeout 30m ./chaos

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./host/internal/mcp
	$(GO) test -run '^$$' -fuzz '^FuzzCallBody$$' -fuzztime $(FUZZTIME) ./host/internal/rest
	$(GO) test -run '^$$' -fuzz '^FuzzParseKey$$' -fuzztime $(FUZZTIME) ./host/internal/rest
	$(GO) test -run '^$$' -fuzz '^FuzzFastCheck$$' -fuzztime $(FUZZTIME) ./internal/registry
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeBlock$$' -fuzztime $(FUZZTIME) ./host/internal/audit
	$(GO) test -run '^$$' -fuzz '^FuzzAnswered$$' -fuzztime $(FUZZTIME) ./host/internal/confirm

# make bench: the Go benchmarks of the hot path, then capgate-bench (bench/)
# with its fixtures: the hello plugin (the trivial tool), the synthetic
# catalogue plugin, and the search floor (BenchmarkFloor of the search
# index, as a test binary).
bench: build
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/capgate-plugin-hello ./host/internal/app/testdata/plugins/hello
	cd bench && $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(abspath $(BIN))/capgate-plugin-synthetic ./plugins/synthetic
	$(GO) test -c -trimpath -ldflags '-s -w' -o $(BIN)/capgate-search-floor.test ./plugins/search/internal/index
	$(GO) test -run '^$$' -bench . -benchmem ./host/internal/mcp ./internal/dispatch ./internal/registry ./host/internal/auth ./sdk/sdktest
	cd bench && $(GO) run ./cmd/capgate-bench -bin $(abspath $(BIN)) $(BENCHFLAGS)

proto:
	@mkdir -p $(BIN)/tools
	GOBIN=$(abspath $(BIN)/tools) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	GOBIN=$(abspath $(BIN)/tools) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(abspath $(BIN)/tools) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VERSION)
	cd proto && ../$(BIN)/tools/buf lint && ../$(BIN)/tools/buf generate

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

fmt:
	gofmt -w $(shell git ls-files '*.go')

clean:
	rm -rf $(BIN)
