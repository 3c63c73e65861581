# Sluice. `make demo` runs the demo on an embedded default; `make test` installs
# the servers it needs (Debian), starts them on loopback ports of its own, runs
# every test with the race detector, and stops them, pass or fail.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
GOBIN ?= $(shell $(GO) env GOPATH)/bin

.PHONY: demo test test-short deps lint bench bench-table fuzz

demo:
	cd cmd/sluice && $(GO) run . demo

# Debian packages for the real servers the tests run against.
deps:
	@if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null || ! command -v memcached >/dev/null; then \
		echo "installing redis-server redis-tools memcached"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server redis-tools memcached >/dev/null; \
	fi

test: deps
	scripts/servers.sh $(MAKE) --no-print-directory test-in-env

# Runs inside scripts/servers.sh, with the servers' addresses in the environment.
.PHONY: test-in-env
test-in-env:
	scripts/promtool.sh
	scripts/modules.sh $(GO) vet ./...
	scripts/modules.sh $(GO) test -race -count=1 -timeout 15m ./...

# Unit tests only: servers are not started, and tests that need them skip.
test-short:
	scripts/modules.sh $(GO) test -race -count=1 -short ./...

lint:
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || { echo "gofmt: the files above need formatting"; exit 1; }
	scripts/modules.sh $(GO) vet ./...
	@command -v staticcheck >/dev/null || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	PATH="$(GOBIN):$$PATH" scripts/modules.sh staticcheck ./...

# Benchmarks against real servers on loopback.
bench: deps
	scripts/servers.sh $(MAKE) --no-print-directory bench-in-env

.PHONY: bench-in-env
bench-in-env:
	scripts/modules.sh $(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./...

# The README's side-by-side table: ROUNDS runs of bench's BenchmarkMatrix, one
# after another so that the rounds interleave, each round with the contenders
# of a cell in an order of its own (SLUICE_MATRIX_ROUND), reduced by
# bench/cmd/benchtable to each peer's ns/op over Sluice's, the median of the
# rounds; then what one decision costs the server and one key its memory
# (BenchmarkServerCost, BenchmarkRedisBytesPerKey) and the memory store's heap
# per key.
ROUNDS ?= 5
BENCHTIME ?= 1s
bench-table: deps
	scripts/servers.sh $(MAKE) --no-print-directory bench-table-in-env

.PHONY: bench-table-in-env
bench-table-in-env:
	cd bench && for i in $$(seq $(ROUNDS)); do \
		SLUICE_MATRIX_ROUND=$$i/$(ROUNDS) GOWORK=off $(GO) test -run '^$$' -bench '^BenchmarkMatrix$$' -benchmem -benchtime $(BENCHTIME) . || exit 1; \
	done | GOWORK=off $(GO) run ./cmd/benchtable
	cd bench && GOWORK=off $(GO) test -run '^$$' -bench '^BenchmarkServerCost$$' -benchtime 5x .
	cd bench && GOWORK=off $(GO) test -run '^$$' -bench '^Benchmark(RedisBytesPerKey|HeapPerKey)$$' -benchtime 1x .

# Longer fuzzing of every algorithm's stated bound (make test runs the seed corpus).
FUZZTIME ?= 30s
fuzz:
	@for f in $$($(GO) test -list '^Fuzz' ./algorithm | grep ^Fuzz); do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./algorithm || exit 1; \
	done
