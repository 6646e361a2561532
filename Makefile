# sluice: the two commands a fresh machine needs are `make run` and `make test`.
GO        ?= go
BIN       := bin/sluice
# The benchmarks are their own module (bench/) and binary: none of it is linked into sluice.
BENCH     := bin/sluice-bench
TOOLS     ?= $(HOME)/.cache/sluice-tools
# `sluice version` prints this; without it the binary reports the module
# version or git commit the Go toolchain recorded.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS   := $(if $(VERSION),-X main.version=$(VERSION))
export SLUICE_TOOLS := $(TOOLS)
# The tests' Python (Litestream, the Python clients) lives in a virtual
# environment of the project's, first on PATH: the system Python is untouched.
export PATH := $(TOOLS)/venv/bin:$(TOOLS)/bin:$(TOOLS)/node_modules/.bin:$(PATH)

# Packages on the write path run under the race detector.
RACE_PKGS := ./wal/... ./engine/... ./server/... ./replica/... ./lease/... ./follow/... ./replicated/...

.PHONY: build sluice bench-bin run test deps lint unit unit-race unit-rest unit-bench bench-restore bench-serve bench-capture bench-soak clean

## build: bin/sluice, and from the bench module bin/sluice-bench (which measures the sluice beside it)
## and bin/sluice-peerapp (the go-sqlite3 peer it compares sluice with).
build: sluice bench-bin

sluice:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/sluice

bench-bin:
	cd bench && $(GO) build -o ../$(BENCH) ./cmd/sluice-bench
	cd bench && $(GO) build -o ../bin/sluice-peerapp ./peers/peerapp

## run: sluice's main job on its embedded default: databases in ./sluice-data,
## every write replicated to file://./sluice-data/replica, HTTP on 127.0.0.1:8080.
run: sluice
	./$(BIN) serve

## test: install what the tests need (idempotent), then lint and run every test
## (-count=1: a second `make test` runs them again, never from Go's test cache).
## Lint runs beside the tests; either failing fails the target.
test: deps
	@$(MAKE) --no-print-directory -j2 --output-sync=line lint unit

deps:
	./scripts/install-test-deps.sh
	./scripts/install-bench-deps.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	staticcheck ./...
	cd bench && staticcheck ./...

# The three groups run at once (most of their time is spent waiting on
# servers, leases and timeouts, not on the CPU); each line is printed whole
# as it comes, so progress shows and a failure names its package.
# Tests that judge a latency or a resource's growth under load (the
# hostile-neighbour canaries, the hand-over gaps, the soaks) run last, one
# package at a time, with nothing beside them (the two soaks side by side:
# each judges the growth of its own server over its own run).
ALONE_E2E := ^(TestHostile|TestHandoffGap)
unit:
	@$(MAKE) --no-print-directory -j3 --output-sync=line unit-race unit-rest unit-bench
	$(GO) test -count=1 -timeout 20m -run '$(ALONE_E2E)' ./e2e/
	cd bench && $(GO) test -count=1 -timeout 20m -run '^TestSoak' ./cmd/sluice-bench/

unit-race:
	$(GO) test -count=1 -race -timeout 30m $(RACE_PKGS)

unit-rest:
	$(GO) test -count=1 -timeout 50m -parallel 4 -skip '$(ALONE_E2E)' $$($(GO) list ./... | grep -v -E '/(wal|engine|server|replica|replicated|lease|follow)(/|$$)')

unit-bench:
	cd bench && $(GO) test -count=1 -timeout 50m -skip '^TestSoak' ./...

## bench-restore: 25 MB (written one row per transaction), 250 MB and 1 GB databases restored by sluice and by Litestream from MinIO.
bench-restore: build
	./$(BENCH) restore -sizes 25MB,250MB,1GB

## bench-serve: sluice serve where users feel it (reads, many databases, sync latency, PUTs per write), each row beside its reference.
bench-serve: build
	./$(BENCH) serve

## bench-capture: a writer flat out, sluice replicate beside Litestream, 60 s then 180 s.
bench-capture: build
	./$(BENCH) capture -duration 60s
	./$(BENCH) capture -duration 180s

## bench-soak: 10 minutes of 50 connections inserting through sluice serve (sync) into MinIO, on one
## database then spread over 100: every window acknowledges writes, RSS, descriptors, store connections,
## objects and the level-0 backlog stay bounded, and a restore holds every acknowledged write.
bench-soak: build
	./$(BENCH) soak -duration 10m -connections 50 -databases 1; one=$$?; \
	./$(BENCH) soak -duration 10m -connections 50 -databases 100; many=$$?; \
	exit $$((one | many))

clean:
	rm -rf bin
