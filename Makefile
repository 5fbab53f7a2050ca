# cri-nstarget. On a fresh Debian machine, as root:
#   make run    the shim in front of containerd (a private one unless CONTAINERD_ADDRESS is set)
#   make demo   the feature end to end, then a clean teardown
#   make test   everything: vet, unit tests, fuzzing (bounded), integration tests (installs what is missing)

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
BIN      := bin/cri-nstarget

# make run: with CONTAINERD_ADDRESS (e.g. /run/containerd/containerd.sock) the
# shim fronts that containerd; without it, a private containerd is started.
CONTAINERD_ADDRESS ?=
LISTEN             ?= unix:///run/cri-nstarget/cri.sock
STATE_DIR          ?= /run/cri-nstarget
ARGS               ?=

.PHONY: all build deps vet unit fuzz integration test run demo bench clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/cri-nstarget
	$(GO) build -o bin/nstarget-lab ./cmd/nstarget-lab

deps:
	./hack/deps.sh

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

unit:
	$(GO) test -count=1 ./...

# Each fuzz target for FUZZTIME (seeds in testdata/fuzz are also run by `unit`).
FUZZTIME ?= 15s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzPlanFor$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzValidateID$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzPatch$$' -fuzztime $(FUZZTIME) ./oci

integration: deps build
	$(GO) test -tags integration -count=1 -v -timeout 20m ./internal/harness/ ./integration/

test: deps vet unit fuzz integration

run: deps build
ifeq ($(CONTAINERD_ADDRESS),)
	./bin/nstarget-lab run --shim $(BIN) --listen $(LISTEN) --state-dir $(STATE_DIR) $(ARGS)
else
	./$(BIN) --listen $(LISTEN) --runtime-endpoint unix://$(CONTAINERD_ADDRESS) \
		--containerd-address $(CONTAINERD_ADDRESS) --state-dir $(STATE_DIR) $(ARGS)
endif

demo: deps build
	./bin/nstarget-lab demo --shim $(BIN)

# The shim against the containerd behind it, interleaved; BENCH_ARGS e.g.
# "-count 50 -calls 5000 -duration 20s". See docs/benchmarks.md.
BENCH_ARGS ?=
bench: deps build
	$(GO) run ./cmd/nstarget-bench -shim-binary $(BIN) $(BENCH_ARGS)

clean:
	rm -rf bin
