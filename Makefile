# cri-nstarget. On a fresh Debian machine, as root:
#   make run    the shim in front of containerd (a private one unless CONTAINERD_ADDRESS is set)
#   make demo   the feature end to end, then a clean teardown
#   make test   all tests: vet, unit (also with -race), fuzzing (bounded), install check, release check
#               (packages built twice, installed and purged in an overlay), integration and conformance
#               (suite + critest parity) on containerd 1.6 (Debian's) and 2.4 (with runc 1.5.2; NRI, and
#               the targeting tests again on the Update path), and end to end with a real kubelet
#               (make e2e), and a systemd node on cgroup v2 under qemu with the .deb installed (make
#               node-e2e); CONTAINERD2=0 leaves out 2.4 (and the node)
#   make release VERSION=vX.Y.Z   binaries, tarballs, .deb and .rpm in dist/
#   make matrix the integration and conformance legs on containerd 2.1 as well (outside CI)
#   make e2e    a real kubelet (and etcd, kube-apiserver) in front of the shim: kubectl debug --target
#               end to end, paired as nodes run them: Kubernetes 1.37 on containerd 2.4, Kubernetes 1.35
#               on containerd 1.6 (versions below; both legs are part of make test)

GO       ?= go
# The build stamps (cri-nstarget --version): the version, the commit (-dirty
# when tracked files changed) and the commit's date, not the clock's, so that
# the same commit builds the same bytes (SOURCE_DATE_EPOCH overrides the date).
# EXTRA_LDFLAGS: more linker flags (make release strips: -s -w).
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT     ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null && echo $$c || echo $$c-dirty; })
BUILD_DATE ?= $(if $(SOURCE_DATE_EPOCH),$(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ),$(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null))
LDFLAGS    := $(EXTRA_LDFLAGS) -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(BUILD_DATE)
# grpcnotrace: grpc-go leaves out golang.org/x/net/trace, whose templates
# (reflect's MethodByName) keep the linker from dropping unused methods: the
# binary is 3.8 MB smaller, and so is its resident text (docs/benchmarks.md).
SHIM_TAGS  := grpcnotrace
BIN      := bin/cri-nstarget

# make run: with CONTAINERD_ADDRESS (e.g. /run/containerd/containerd.sock) the
# shim fronts that containerd; without it, a private containerd is started.
CONTAINERD_ADDRESS ?=
LISTEN             ?= unix:///run/cri-nstarget/cri.sock
STATE_DIR          ?= /run/cri-nstarget
ARGS               ?=

.PHONY: all build deps vet unit fuzz integration integration-containerd2 test run demo bench clean

all: build

build:
	$(GO) build -tags $(SHIM_TAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/cri-nstarget
	$(GO) build -o bin/nstarget-lab ./cmd/nstarget-lab

deps:
	./hack/deps.sh

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) vet -tags e2e ./e2e/
	$(GO) vet -tags node ./e2e/node/
	$(GO) vet -tags upstream ./e2e/upstream/
	$(GO) vet -tags soakbreak_intents ./server/
	$(GO) vet -tags soakbreak_nrigate ./nriplugin/

# Static checks: gofmt leaves nothing to change, go vet (above), and
# staticcheck at a pinned version (run from the module proxy, never in go.mod).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1
.PHONY: lint
lint: vet
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags integration ./...
	$(GO) run $(STATICCHECK) -tags e2e ./e2e/
	$(GO) run $(STATICCHECK) -tags node ./e2e/node/
	$(GO) run $(STATICCHECK) -tags upstream ./e2e/upstream/
	$(GO) run $(STATICCHECK) -tags failpoints ./server/ ./cmd/...
	$(GO) run $(STATICCHECK) -tags soakbreak_intents ./server/
	$(GO) run $(STATICCHECK) -tags soakbreak_nrigate ./nriplugin/

unit:
	$(LEG) $(GO) test -count=1 ./...

# The unit packages again under the race detector (needs cgo and gcc).
.PHONY: race
race:
	$(LEG) $(GO) test -race -count=1 ./...

# Each fuzz target for a number of executions, about 15 s each on a 2-core
# machine (seeds in testdata/fuzz are also run by `unit`). A count, not a
# duration: with a duration, Go 1.26's coordinator can report its own deadline
# as the target's failure ("context deadline exceeded", no failing input;
# go.dev/issue/75804, fixed in 1.27). A count sets no deadline, so a failure is
# always the target's. Minimizing a new input counts against the same number
# and runs far slower, so it is capped at 5 s (the default is 60 s).
# FUZZTIME=10m make fuzz runs each target for a duration instead.
FUZZTIME ?=
fuzz_for = -fuzztime $(or $(FUZZTIME),$(1)x) -fuzzminimizetime 5s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCreate$$' $(call fuzz_for,150000) ./criwire
	$(GO) test -run '^$$' -fuzz '^FuzzPlanFor$$' $(call fuzz_for,20000) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzValidateID$$' $(call fuzz_for,800000) ./pins
	$(GO) test -run '^$$' -fuzz '^FuzzPatch$$' $(call fuzz_for,400000) ./oci

# h2spec (HTTP/2 conformance) for integration/h2spec_test.go, built into bin/
# from its own module (hack/h2spec/go.mod), so it never enters go.mod:
# v2.2.1+incompatible, the newest the module path serves (later tags have a
# go.mod without /v2), with its imports (x/net, cobra, color) pinned there.
.PHONY: h2spec-tool
h2spec-tool:
	cd hack/h2spec && $(GO) build -o ../../bin/h2spec github.com/summerwind/h2spec/cmd/h2spec

# h2spec (TestH2spec) runs on the containerd 2.4 leg; on 1.6 with H2SPEC_16=1.
H2SPEC_16 ?= 0
integration: deps build h2spec-tool
	NSTARGET_H2SPEC=$(if $(filter 1,$(H2SPEC_16)),$(CURDIR)/bin/h2spec,off) \
		$(LEG) $(GO) test -tags integration -count=1 -v -timeout 20m ./internal/harness/ ./integration/

# The same against the newest containerd 2.x with runc built from source
# (hack/containerd.sh and hack/runc.sh build them once into
# /var/cache/cri-nstarget): containerd $(CONTAINERD2_VERSION), runc 1.5.2.
CONTAINERD2_VERSION ?= v2.4.2
# CONTAINERD2=0 leaves out every containerd 2.x leg: $(call with_containerd2,X)
# is X, or nothing then.
CONTAINERD2 ?= 1
with_containerd2 = $(if $(filter 0,$(CONTAINERD2)),,$(1))
CONTAINERD2_BIN     := $$(CONTAINERD_VERSION=$(CONTAINERD2_VERSION) ./hack/containerd.sh)/containerd
RUNC2_BIN           := $$(./hack/runc.sh)/runc
integration-containerd2: deps build h2spec-tool
	NSTARGET_CONTAINERD="$(CONTAINERD2_BIN)" NSTARGET_RUNC="$(RUNC2_BIN)" NSTARGET_H2SPEC=$(CURDIR)/bin/h2spec \
		NSTARGET_REQUIRE_USERNS=1 NSTARGET_REQUIRE_NRI=1 \
		$(LEG) $(GO) test -tags integration -count=1 -v -timeout 20m ./internal/harness/ ./integration/

# On containerd 2.4 the shim targets through NRI; the targeting tests again
# with every shim forced onto the Update path (--targeting-via update).
UPDATE_PATH_TESTS ?= Target|IPC|UserNamespaced|PIDReuse|Crash|Pins|Refus|Prefix|Stopped|Wire
.PHONY: integration-containerd2-update
integration-containerd2-update: deps build
	NSTARGET_CONTAINERD="$(CONTAINERD2_BIN)" NSTARGET_RUNC="$(RUNC2_BIN)" NSTARGET_REQUIRE_USERNS=1 \
		NSTARGET_SHIM_FLAGS="--targeting-via update" \
		$(LEG) $(GO) test -tags integration -count=1 -v -timeout 10m -run '$(UPDATE_PATH_TESTS)' -skip 'TestNRI' ./integration/

# `make matrix` (outside `make test`, which keeps CI short): the same legs on
# containerd $(MATRIX_CONTAINERD_VERSION) with Debian's runc.
MATRIX_CONTAINERD_VERSION ?= v2.1.4
MATRIX_CONTAINERD_BIN     := $$(CONTAINERD_VERSION=$(MATRIX_CONTAINERD_VERSION) ./hack/containerd.sh)/containerd
.PHONY: matrix integration-matrix conformance-matrix
matrix: integration-matrix conformance-matrix
integration-matrix: deps build h2spec-tool
	NSTARGET_CONTAINERD="$(MATRIX_CONTAINERD_BIN)" NSTARGET_H2SPEC=$(CURDIR)/bin/h2spec \
		$(LEG) $(GO) test -tags integration -count=1 -v -timeout 20m ./internal/harness/ ./integration/

# End to end with a real kubelet (e2e/, internal/cluster): a private
# containerd, the shim in front of it, and on 127.0.0.1 etcd (Debian's
# etcd-server, unpacked into the cache by hack/etcd.sh, never installed),
# kube-apiserver and a kubelet whose runtime is the shim; kubectl debug
# --target and the rest of e2e/*_test.go, then a teardown that must leave
# the machine as found. Kubernetes is built from the module proxy
# (hack/kubernetes.sh, ~5 min per version, once) into /var/cache/cri-nstarget.
# The two Kubernetes versions are named here only: the newest release and the
# oldest one still supported (Kubernetes supports three minors). They are
# paired with the backends as nodes run them:
#   e2e-containerd2    containerd 2.4.2 + runc 1.5.2   kube-apiserver, kubelet, kubectl $(KUBERNETES_NEWEST)
#   e2e-containerd16   containerd 1.6.20 (Debian's)    kube-apiserver, kubelet, kubectl $(KUBERNETES_OLDEST);
#                      then TestCRIListStreaming alone on $(KUBERNETES_NEWEST): kubelet 1.35 has no
#                      CRIListStreaming gate, and containerd 1.6 answers its streaming list RPCs
#                      Unimplemented, which is the kubelet's fallback the test needs (2.4 implements them)
#   make e2e           both legs (CONTAINERD2=0 leaves out the 2.4 one)
KUBERNETES_NEWEST ?= v1.37.2
KUBERNETES_OLDEST ?= v1.35.4
kube_env = NSTARGET_KUBERNETES_BIN="$$(KUBERNETES_VERSION=$(1) ./hack/kubernetes.sh)" \
	NSTARGET_ETCD="$$(./hack/etcd.sh)/etcd" NSTARGET_SHIM_BINARY=$(CURDIR)/$(BIN)
E2E_TEST = $(GO) test -tags e2e -count=1 -v -timeout 15m ./e2e/
.PHONY: e2e e2e-containerd16 e2e-containerd2 e2e-tools
e2e: e2e-containerd16 $(call with_containerd2,e2e-containerd2)
# Both versions, one build at a time (each ~5 min from an empty cache).
e2e-tools: deps build
	KUBERNETES_VERSION=$(KUBERNETES_NEWEST) ./hack/kubernetes.sh >/dev/null
	KUBERNETES_VERSION=$(KUBERNETES_OLDEST) ./hack/kubernetes.sh >/dev/null
	./hack/etcd.sh >/dev/null
e2e-containerd16: e2e-tools
	$(LEG) sh -c '$(call kube_env,$(KUBERNETES_OLDEST)) NSTARGET_E2E_LOGS=$(CURDIR)/bin/e2e/containerd16 $(E2E_TEST) && \
		$(call kube_env,$(KUBERNETES_NEWEST)) NSTARGET_E2E_LOGS=$(CURDIR)/bin/e2e/containerd16-streaming $(E2E_TEST) -run "^TestCRIListStreaming$$"'
e2e-containerd2: e2e-tools
	$(call kube_env,$(KUBERNETES_NEWEST)) NSTARGET_CONTAINERD="$(CONTAINERD2_BIN)" NSTARGET_RUNC="$(RUNC2_BIN)" NSTARGET_REQUIRE_USERNS=1 \
		NSTARGET_E2E_LOGS=$(CURDIR)/bin/e2e/containerd2 $(LEG) $(E2E_TEST)

# A busy node under random faults (issue 36; cmd/nstarget-soak,
# internal/soak), outside `make test`: the e2e cluster (kubelet
# $(KUBERNETES_NEWEST), the shim as its runtime) with ~30 pods, pods replaced
# every few seconds, a debug container with --target about once a second, and
# at seeded random times the shim SIGKILLed or SIGTERMed (restarted as
# systemd would), containerd restarted, a target killed as its debug
# container is made, the shim's NRI plugin registering while pods are
# removed. Every debug container must have joined its target, fallen back
# with a reason, or been refused with a typed error; the node must recover
# within the bound after each fault; nothing may be left that no pod owns;
# the shim may not grow. The seed, the schedule and the report are printed
# (docs/reliability.md, Soak); the components' logs go to bin/soak/.
#   make soak                            30 minutes on containerd $(CONTAINERD2_VERSION) (NRI)
#   make soak SOAK_DURATION=3m           a smoke run
#   make soak SOAK_BACKEND=1.7           on containerd $(SOAK_CONTAINERD17_VERSION) (the Update path)
#   make soak SOAK_SEED=N                the schedule and workload of seed N again
#   make soak SOAK_BREAK=intents|nrigate a deliberately broken shim (build tag
#                                        soakbreak_*): the run must FAIL
#   SOAK_ARGS="--faults K1,K2 --fault-every 20s"  only these faults, this often
SOAK_DURATION ?= 30m
SOAK_SEED     ?=
SOAK_BACKEND  ?= 2.4
SOAK_BREAK    ?=
SOAK_ARGS     ?=
SOAK_CONTAINERD17_VERSION ?= v1.7.35
soak_containerd = $(if $(filter 1.7,$(SOAK_BACKEND)),$(SOAK_CONTAINERD17_VERSION),$(CONTAINERD2_VERSION))
.PHONY: soak
soak: deps build
	$(GO) build -o bin/nstarget-soak ./cmd/nstarget-soak
	./bin/nstarget-soak --duration $(SOAK_DURATION) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) $(if $(SOAK_BREAK),--break $(SOAK_BREAK)) \
		--shim-binary $(BIN) --kubernetes-bin "$$(KUBERNETES_VERSION=$(KUBERNETES_NEWEST) ./hack/kubernetes.sh)" \
		--etcd "$$(./hack/etcd.sh)/etcd" --containerd "$$(CONTAINERD_VERSION=$(soak_containerd) ./hack/containerd.sh)/containerd" \
		--runc "$(RUNC2_BIN)" --logs $(CURDIR)/bin/soak $(SOAK_ARGS)

# Kubernetes' own e2e specs through the shim (issue 26; e2e/upstream,
# internal/upstream), a leg of `make test`: e2e.test $(KUBERNETES_NEWEST)
# (hack/kubernetes.sh --upstream-e2e, ~11 min once) against the e2e cluster
# with its kube-controller-manager and kube-scheduler (kubelet $(KUBERNETES_NEWEST)
# on both backends), the specs' images (busybox, nginx, agnhost, pause) built
# here and served under their registry.k8s.io names; then the project's own
# specs on the same framework (e2e/kubetest, built into $(PROJECT_E2E) by
# hack/kubernetes.sh --project-e2e). On containerd $(CONTAINERD2_VERSION) (runc
# 1.5.2, NRI) and Debian's 1.6.20, each run directly and through the shim;
# the parity table (spec, direct, shim, time) of each backend ends the
# output. Every spec that passes directly must pass through the shim.
# Reports, tables and logs: bin/e2e-upstream/BACKEND/.
#   make e2e-upstream                  the two Ephemeral Containers [Conformance] specs,
#                                      the kubectl debug ones and the project's
#                                      --target spec (CONTAINERD2=0: 1.6 only)
#   make e2e-upstream UPSTREAM_FOCUS=RE  other specs (a ginkgo focus regexp);
#                                      UPSTREAM_PROCS=N runs them in N processes
UPSTREAM_FOCUS ?=
UPSTREAM_SKIP  ?=
UPSTREAM_PROCS ?= 1
UPSTREAM_TIMEOUT ?= 20m
UPSTREAM_OUT   ?= bin/e2e-upstream
UPSTREAM_TEST   = $(GO) test -tags upstream -count=1 -v -timeout 0 ./e2e/upstream/
upstream_leg    = $(call kube_env,$(KUBERNETES_NEWEST)) NSTARGET_UPSTREAM_FOCUS='$(UPSTREAM_FOCUS)' \
	NSTARGET_UPSTREAM_SKIP='$(UPSTREAM_SKIP)' NSTARGET_UPSTREAM_PROCS=$(UPSTREAM_PROCS) NSTARGET_UPSTREAM_TIMEOUT=$(UPSTREAM_TIMEOUT) \
	NSTARGET_UPSTREAM_OUT=$(CURDIR)/$(UPSTREAM_OUT)/$(1) $(if $(PROJECT_E2E),NSTARGET_PROJECT_E2E=$(CURDIR)/$(PROJECT_E2E)) \
	./hack/leg.sh e2e-upstream-$(1)
# A run clears only its backends' results: a CONTAINERD2=0 run keeps 2.4's.
upstream_dirs   = $(addprefix $(UPSTREAM_OUT)/,$(call with_containerd2,containerd2) containerd16)
.PHONY: e2e-upstream e2e-upstream-tools
PROJECT_E2E    ?= bin/nstarget-e2e.test
e2e-upstream-tools: deps build
	KUBERNETES_VERSION=$(KUBERNETES_NEWEST) ./hack/kubernetes.sh --upstream-e2e >/dev/null
	$(if $(PROJECT_E2E),KUBERNETES_VERSION=$(KUBERNETES_NEWEST) ./hack/kubernetes.sh --project-e2e $(PROJECT_E2E) >/dev/null)
	./hack/etcd.sh >/dev/null
e2e-upstream: e2e-upstream-tools
	rm -rf $(upstream_dirs)
	rc=0; \
	$(call with_containerd2,NSTARGET_CONTAINERD="$(CONTAINERD2_BIN)" NSTARGET_RUNC="$(RUNC2_BIN)" $(call upstream_leg,containerd2) $(UPSTREAM_TEST) || rc=1;) \
	$(call upstream_leg,containerd16) $(UPSTREAM_TEST) || rc=1; \
	cat $(addsuffix /parity.txt,$(upstream_dirs)) 2>/dev/null; exit $$rc

# Every [NodeConformance] spec of e2e.test $(KUBERNETES_NEWEST), the same way
# (directly and through the shim, on both backends), in ginkgo's parallel
# processes ([Serial] specs alone at the end), outside `make test`: about
# 55 minutes per run, four runs (CONTAINERD2=0: 1.6's two, keeping 2.4's
# results). Specs that fail directly need their reason in
# e2e/upstream/known-failures.txt. Tables:
# bin/node-conformance/BACKEND/parity.txt;
# docs/conformance.md's table is made from them by
#   bin/nstarget-matrix upstream --docs docs/conformance.md bin/node-conformance
NODE_CONFORMANCE_PROCS ?= 12
.PHONY: node-conformance
node-conformance:
	$(MAKE) e2e-upstream UPSTREAM_FOCUS='\[NodeConformance\]' UPSTREAM_PROCS=$(NODE_CONFORMANCE_PROCS) \
		UPSTREAM_TIMEOUT=100m UPSTREAM_OUT=bin/node-conformance PROJECT_E2E=

# Each leg of `make test` prints its time (hack/leg.sh; .ci/run lists them all).
LEG = ./hack/leg.sh $@
test: deps lint unit race fuzz install-check release-check integration conformance-ci e2e-containerd16 \
	$(call with_containerd2,integration-containerd2 integration-containerd2-update conformance-ci-containerd2 e2e-containerd2) \
	e2e-upstream $(call with_containerd2,node-e2e)

run: deps build
ifeq ($(CONTAINERD_ADDRESS),)
	./bin/nstarget-lab run --shim $(BIN) --listen $(LISTEN) --state-dir $(STATE_DIR) $(ARGS)
else
	./$(BIN) --listen $(LISTEN) --runtime-endpoint unix://$(CONTAINERD_ADDRESS) \
		--containerd-address $(CONTAINERD_ADDRESS) --state-dir $(STATE_DIR) $(ARGS)
endif

demo: deps build
	./bin/nstarget-lab demo --shim $(BIN)

# The shim and a byte splice (the floor of any proxy) against the containerd
# behind them, interleaved in one run; ends with the table of docs/benchmarks.md
# (figure | target | measured | met/missed). BENCH_ARGS e.g.
# "-count 100 -calls 3000 -duration 12s".
BENCH_ARGS ?=
bench: deps build
	$(GO) run ./cmd/nstarget-bench -shim-binary $(BIN) $(BENCH_ARGS)

# A TARGET create never waits on the apiserver (issue 33): three shims of
# this build in front of one containerd, events off, on (kube-apiserver
# $(KUBERNETES_NEWEST) with a node's identity) and to an apiserver that never
# answers, with containerd's own TARGET create, interleaved (about 2 min).
# BENCH_EVENTS_ARGS e.g. "-count 100".
BENCH_EVENTS_ARGS ?=
.PHONY: bench-events
bench-events: deps build
	$(GO) run ./cmd/nstarget-bench events --shim-binary $(BIN) --kubernetes-bin "$$(KUBERNETES_VERSION=$(KUBERNETES_NEWEST) ./hack/kubernetes.sh)" \
		--etcd "$$(./hack/etcd.sh)/etcd" $(BENCH_EVENTS_ARGS)

clean:
	rm -rf bin

# Install (docs/operations.md), for a node or an image being baked: honours
# PREFIX and DESTDIR, starts and enables nothing (no systemctl: fine in a chroot).
#   make install [PREFIX=/usr/local] [DESTDIR=/mnt/image]
#   make uninstall [PREFIX=...] [DESTDIR=...]   keeps an /etc config that was changed
#   make install-check   install into temporary DESTDIRs and check the result
# The unit goes to $(PREFIX)/lib/systemd/system, where systemd looks for
# /usr/local and /usr alike; its ExecStart is $(BINDIR)/cri-nstarget. The
# config is $(SYSCONFDIR)/cri-nstarget/config.toml, never overwritten.
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
UNITDIR      ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR   ?= /etc
DOCDIR       ?= $(PREFIX)/share/doc/cri-nstarget
MANDIR       ?= $(PREFIX)/share/man
INSTALL_OUT  := _output
INSTALL_CONF := $(DESTDIR)$(SYSCONFDIR)/cri-nstarget/config.toml
INSTALL_FILL := sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g'

.PHONY: shim install uninstall install-check

shim:
	$(GO) build -tags $(SHIM_TAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/cri-nstarget

install: shim
	@mkdir -p $(INSTALL_OUT)
	$(INSTALL_FILL) systemd/cri-nstarget.service.in >$(INSTALL_OUT)/cri-nstarget.service
	$(INSTALL_FILL) systemd/kubelet.service.d/20-cri-nstarget.conf >$(INSTALL_OUT)/20-cri-nstarget.conf
	install -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/cri-nstarget \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)/examples/kubelet.service.d
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/cri-nstarget
	install -m 0644 $(INSTALL_OUT)/cri-nstarget.service $(DESTDIR)$(UNITDIR)/cri-nstarget.service
	install -m 0644 docs/cri-nstarget.8 $(DESTDIR)$(MANDIR)/man8/cri-nstarget.8
	install -m 0644 README.md docs/operations.md LICENSE $(DESTDIR)$(DOCDIR)/
	install -m 0644 config/default.toml $(DESTDIR)$(DOCDIR)/examples/config.toml
	install -m 0644 $(INSTALL_OUT)/20-cri-nstarget.conf $(DESTDIR)$(DOCDIR)/examples/kubelet.service.d/20-cri-nstarget.conf
	@if [ -e $(INSTALL_CONF) ]; then echo "keeping $(INSTALL_CONF); the defaults are in $(DOCDIR)/examples/config.toml"; \
	else echo "install -m 0644 config/default.toml $(INSTALL_CONF)"; install -m 0644 config/default.toml $(INSTALL_CONF); fi
	@echo "installed; on a running node: systemctl daemon-reload && systemctl enable --now cri-nstarget (docs/operations.md)"

# The /etc config goes only if it is still the shipped default.
uninstall:
	@if [ -e $(INSTALL_CONF) ]; then \
		if cmp -s $(INSTALL_CONF) $(DESTDIR)$(DOCDIR)/examples/config.toml || cmp -s $(INSTALL_CONF) config/default.toml; then \
			echo "rm -f $(INSTALL_CONF)"; rm -f $(INSTALL_CONF); \
		else echo "keeping $(INSTALL_CONF): it was changed"; fi; fi
	rm -f $(DESTDIR)$(BINDIR)/cri-nstarget $(DESTDIR)$(UNITDIR)/cri-nstarget.service \
		$(DESTDIR)$(MANDIR)/man8/cri-nstarget.8 $(DESTDIR)$(DOCDIR)/README.md $(DESTDIR)$(DOCDIR)/operations.md $(DESTDIR)$(DOCDIR)/LICENSE \
		$(DESTDIR)$(DOCDIR)/examples/config.toml $(DESTDIR)$(DOCDIR)/examples/kubelet.service.d/20-cri-nstarget.conf
	-@rmdir $(DESTDIR)$(SYSCONFDIR)/cri-nstarget $(DESTDIR)$(DOCDIR)/examples/kubelet.service.d \
		$(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null || true

install-check:
	MAKE="$(MAKE)" ./hack/install-check.sh

# config/default.toml is what `cri-nstarget config default` prints (a unit test checks).
config/default.toml: config/config.go
	$(GO) run ./cmd/cri-nstarget config default >$@.tmp && mv $@.tmp $@

# Conformance (docs/conformance.md): the TARGET suite (conformance/, any CRI
# endpoint) and critest $(CRITEST_VERSION), against a private containerd, directly and
# through the shim; critest must pass the same specs both ways.
#   make conformance-ci             containerd 1.6 (Debian): suite + critest parity (~3.5 min)
#   make conformance-ci-containerd2 the same on containerd 2.4 with runc 1.5.2 (hack/containerd.sh
#                                   and hack/runc.sh build them once into /var/cache/cri-nstarget)
#   make conformance-matrix         the same on containerd 2.1 (part of `make matrix`)
#   make conformance                all three, then the tables in docs/conformance.md
# critest and its stand-in binary are built from their own module
# (hack/critest/go.mod), so their dependencies never touch go.mod.
# critest's version is named once, in hack/critest/go.mod.
CRITEST_VERSION := $(shell sed -n 's|^require sigs.k8s.io/cri-tools \(v[^ ]*\).*|\1|p' hack/critest/go.mod)
CONFORMANCE_OUT ?= bin/conformance
CRITEST_SKIP    ?= hack/critest/skip.txt
CONFORMANCE_RUN  = bin/nstarget-matrix run --shim $(BIN) --suite bin/nstarget-conformance \
	--critest bin/critest --critest-standin bin/critest-standin --critest-skip $(CRITEST_SKIP) \
	--out $(CONFORMANCE_OUT) --critest-busybox "$$(./hack/busybox-full.sh)"

.PHONY: conformance conformance-ci conformance-ci-containerd2 conformance-tools conformance-report

conformance-tools: build
	$(GO) test -c -o bin/nstarget-conformance ./conformance
	$(GO) build -o bin/nstarget-matrix ./cmd/nstarget-matrix
	cd hack/critest && CGO_ENABLED=0 $(GO) build -o ../../bin/critest-standin ./standin
	cd hack/critest && $(GO) test -c -o ../../bin/critest \
		-ldflags "-X sigs.k8s.io/cri-tools/pkg/version.Version=$(CRITEST_VERSION)" sigs.k8s.io/cri-tools/cmd/critest

conformance-ci: deps conformance-tools
	$(LEG) $(CONFORMANCE_RUN) --backend containerd-1.6 --containerd containerd

# containerd 2.4 with runc 1.5.2, as integration-containerd2. critest also
# runs its NRI specs there (--critest-nri): a plugin of its own on
# containerd's NRI socket, alone directly, beside the shim's through the
# shim. critest's floor is what a run passed both ways: 124, every
# UserNamespaces and NRI spec that critest does not skip itself included
# (nstarget-matrix records the same floor for containerd-2.4).
CRITEST_MIN_PASS_CONTAINERD24 ?= 124
conformance-ci-containerd2: deps conformance-tools
	NSTARGET_RUNC="$(RUNC2_BIN)" $(LEG) $(CONFORMANCE_RUN) --backend containerd-2.4 \
		--containerd "$(CONTAINERD2_BIN)" --critest-min-pass $(CRITEST_MIN_PASS_CONTAINERD24) --critest-nri \
		--modes direct,shim,shim-strict,shim-update
.PHONY: conformance-ci-containerd24
conformance-ci-containerd24: conformance-ci-containerd2

# `make matrix`: containerd 2.1 with Debian's runc.
conformance-matrix: deps conformance-tools
	$(LEG) $(CONFORMANCE_RUN) --backend containerd-2.1 --containerd "$(MATRIX_CONTAINERD_BIN)"

conformance: conformance-ci conformance-ci-containerd2 conformance-matrix
	$(MAKE) conformance-report

conformance-report:
	bin/nstarget-matrix report --docs docs/conformance.md $(CONFORMANCE_OUT)

# critest -benchmark (docs/benchmarks.md), nstarget-bench's critest mode:
# critest's benchmark specs against a private containerd 1.6, directly
# and through the shim, in alternating rounds, then a side-by-side table
# (bin/bench-critest/summary.md).
# About 2.5 minutes; BENCH_CRITEST_ARGS e.g. "-rounds 12 -pods 40 -containers 40 -images 40" (about 7).
BENCH_CRITEST_ARGS ?=
.PHONY: bench-critest
bench-critest: deps conformance-tools
	$(GO) run ./cmd/nstarget-bench critest --shim-binary $(BIN) --critest bin/critest --critest-standin bin/critest-standin \
		--critest-busybox "$$(./hack/busybox-full.sh)" --containerd containerd --out bin/bench-critest $(BENCH_CRITEST_ARGS)

# Release artifacts for node image bakers (docs/operations.md, "Image
# bakers"), into $(DIST): static binaries (CGO off, -trimpath, stamped),
# tarballs of make install's tree with sha256sum files, a .deb and an .rpm
# (nfpm v2.45.2, built from its own module, hack/nfpm/go.mod) per
# architecture, and SHA256SUMS. hack/release.sh says what each holds.
#   make release VERSION=vX.Y.Z [RELEASE_ARCHES="amd64 arm64"] [ALLOW_DIRTY=1]
#   make release-check   builds them twice and compares, verifies checksums
#                        and ELF arches, lints the .deb, installs, removes and
#                        purges it (in a throw-away overlay of /), and runs
#                        the image-baker recipes of docs/operations.md
DIST           ?= dist
RELEASE_ARCHES ?= amd64 arm64
.PHONY: release release-check
release:
	VERSION="$(VERSION)" DIST="$(DIST)" RELEASE_ARCHES="$(RELEASE_ARCHES)" GO="$(GO)" MAKE="$(MAKE)" ./hack/release.sh

release-check: deps
	GO="$(GO)" MAKE="$(MAKE)" $(LEG) ./hack/release-check.sh

# A real node under qemu (issue 25; e2e/node, internal/node): Debian 12 with
# systemd as PID 1 on cgroup v2, built from Debian's packages only and cached
# (hack/node/image.sh, about 3 min once), booted under TCG (NODE_ACCEL=kvm
# only where /dev/kvm works for real). Inside it, as a baker would: the .deb
# of this tree installed with dpkg, containerd with the systemd cgroup
# driver, kubelet $(KUBERNETES_NEWEST) with cgroupDriver systemd and the default
# failCgroupV1 (so it proves cgroup v2), started by their units; the control
# plane (etcd, kube-apiserver) runs on the host, at 10.0.2.2 for the guest.
#   make node-e2e        (part of make test) containerd $(CONTAINERD2_VERSION) with runc 1.5.2: install,
#                        Ready through the shim, kubectl debug --target, the journal's fields and
#                        priorities, restarts of the shim (systemctl, kill -9) and of containerd
#   make node-e2e-full   every scenario on containerd $(CONTAINERD2_VERSION) and on Debian's 1.6.20: the
#                        above, then package life (upgrade while running, remove, purge, reinstall)
#                        and a reboot on the same disk
#   make node-boot-check boot the image and check systemd, cgroup v2, the share, 10.0.2.2
# Each step prints its time; consoles and journals go to bin/node/.
NODE_ACCEL ?= tcg
NODE_AGENT := bin/node/nstarget-node-agent
NODE_LEG    = ./hack/leg.sh
# The two packages the node installs, built from this tree (ALLOW_DIRTY: a
# test build; its stamp says -dirty when the tree is): the first, then the
# upgrade.
NODE_DEB_VERSIONS := v0.0.0-node.1 v0.0.0-node.2
NODE_E2E_SHORT    := TestNode/containerd-2.4.2/^(install|debug|logs|restarts)$$
.PHONY: node-image node-boot-check node-tools node-e2e node-e2e-full
node-image:
	$(NODE_LEG) $@ ./hack/node/image.sh
node-boot-check: node-image
	$(NODE_LEG) node-agent env CGO_ENABLED=0 $(GO) build -trimpath -o $(NODE_AGENT) ./internal/nodeagent
	NSTARGET_NODE_IMAGE="$$(./hack/node/image.sh)" NSTARGET_NODE_AGENT=$(CURDIR)/$(NODE_AGENT) \
		NSTARGET_NODE_ACCEL=$(NODE_ACCEL) NSTARGET_NODE_LOGS=$(CURDIR)/bin/node \
		$(NODE_LEG) $@ $(GO) test -count=1 -v -run '^TestBoot$$' ./internal/node/
node-tools: deps node-image
	$(NODE_LEG) node-agent env CGO_ENABLED=0 $(GO) build -trimpath -o $(NODE_AGENT) ./internal/nodeagent
	cd hack/critest && CGO_ENABLED=0 $(GO) build -trimpath -o ../../bin/node/crictl sigs.k8s.io/cri-tools/cmd/crictl
	for v in $(NODE_DEB_VERSIONS); do \
		$(MAKE) --no-print-directory release VERSION=$$v RELEASE_ARCHES=amd64 DIST=bin/node/dist-$$v ALLOW_DIRTY=1 >/dev/null || exit 1; \
	done
node_env = NSTARGET_NODE_IMAGE="$$(./hack/node/image.sh)" NSTARGET_NODE_AGENT=$(CURDIR)/$(NODE_AGENT) \
	NSTARGET_NODE_ACCEL=$(NODE_ACCEL) NSTARGET_NODE_LOGS=$(CURDIR)/bin/node \
	NSTARGET_NODE_DEB="$$(ls $(CURDIR)/bin/node/dist-$(word 1,$(NODE_DEB_VERSIONS))/*_amd64.deb)" \
	NSTARGET_NODE_DEB_UPGRADE="$$(ls $(CURDIR)/bin/node/dist-$(word 2,$(NODE_DEB_VERSIONS))/*_amd64.deb)" \
	NSTARGET_NODE_CRICTL=$(CURDIR)/bin/node/crictl \
	NSTARGET_KUBERNETES_BIN="$$(KUBERNETES_VERSION=$(KUBERNETES_NEWEST) ./hack/kubernetes.sh)" NSTARGET_ETCD="$$(./hack/etcd.sh)/etcd" \
	NSTARGET_CONTAINERD2_DIR="$$(CONTAINERD_VERSION=$(CONTAINERD2_VERSION) ./hack/containerd.sh)" NSTARGET_RUNC2="$(RUNC2_BIN)"
NODE_TEST = $(GO) test -tags node -count=1 -v -timeout 40m ./e2e/node/
node-e2e: node-tools
	$(node_env) $(NODE_LEG) $@ $(NODE_TEST) -run '$(NODE_E2E_SHORT)'
# NODE_RUN: go test's -run for node-e2e-full (e.g. TestNode/containerd-1.6.20).
NODE_RUN ?= ^TestNode$$
node-e2e-full: node-tools
	$(node_env) $(NODE_LEG) $@ $(NODE_TEST) -run '$(NODE_RUN)'
