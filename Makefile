# cri-nstarget. On a fresh Debian machine, as root:
#   make run    the shim in front of containerd (a private one unless CONTAINERD_ADDRESS is set:
#               RUN_BACKEND, by default 2.4, built once into /var/cache/cri-nstarget, a few minutes
#               the first time, its progress shown; 2.3, 2.0 or 1.7 likewise; RUN_BACKEND=1.6 is quick,
#               Debian's 1.6.20, past end of life), and crictl
#   make demo   the feature end to end, then a clean teardown (RUN_BACKEND as for make run)
#   make test   all tests: vet, unit (also with -race), the Helm chart against deploy/ (chart-check),
#               fuzzing (bounded), install check, release check
#               (packages built twice, installed and purged in an overlay), then on each supported
#               containerd (BACKENDS: 2.4 the newest, 2.3 and 2.0 the LTS; each with its own runc)
#               integration, conformance (the TARGET suite, the shipped nstarget-conformance, on all
#               three; critest parity on 2.4, TEST_CRITEST_BACKENDS), end to end with the kubelet
#               nodes pair it with (make e2e: 1.37, 1.36, 1.35), Kubernetes' own specs on 2.4 (make
#               e2e-upstream); and a systemd node on cgroup v2 under qemu with the .deb installed
#               (make node-e2e). BACKENDS="2.4" runs one; the versions are below.
#   make release [VERSION=vX.Y.Z]   binaries, tarballs, .deb and .rpm, the cluster install's image,
#               deploy/ and Helm chart (naming the image's digest) in dist/, with release notes
#               and package changelogs from CHANGELOG.md (VERSION must have its entry there; by
#               default the newest release there)
#   make docs   the flag and key reference (docs/operations.md, man page) and config/default.toml, from config/
#   make matrix integration and conformance on containerd 1.7 (best effort), 1.6 and 2.1 (outside CI)
#   make e2e    a real kubelet (and etcd, kube-apiserver) in front of the shim: kubectl debug --target
#               end to end, on each backend with its kubelet (part of make test)

GO       ?= go
# The build stamps (cri-nstarget --version): the version, the commit (-dirty
# when tracked files changed) and the commit's date, not the clock's, so that
# the same commit builds the same bytes (SOURCE_DATE_EPOCH overrides the date).
# The version is CHANGELOG.md's newest release (its first "## [X.Y.Z] -
# YYYY-MM-DD", as vX.Y.Z), read by cmd/nstarget-changelog, which make
# release cuts the notes with; not a git tag, which a clone need not have. A build between
# releases says the last release and its own commit. VERSION=... overrides it
# (make release VERSION=vX.Y.Z); make print-version prints it.
# EXTRA_LDFLAGS: more linker flags (make release strips: -s -w).
ifeq ($(origin VERSION),undefined)
VERSION    := $(shell GOOS= GOARCH= $(GO) run ./cmd/nstarget-changelog newest)
$(if $(VERSION),,$(error no version: "$(GO) run ./cmd/nstarget-changelog newest" printed none (why: above; no Go, or no "## [X.Y.Z] - YYYY-MM-DD" in CHANGELOG.md); or give VERSION=vX.Y.Z))
endif
COMMIT     ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null && echo $$c || echo $$c-dirty; })
BUILD_DATE ?= $(if $(SOURCE_DATE_EPOCH),$(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ),$(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null))
LDFLAGS    := $(EXTRA_LDFLAGS) -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(BUILD_DATE)
# grpcnotrace: grpc-go leaves out golang.org/x/net/trace, whose templates
# (reflect's MethodByName) keep the linker from dropping unused methods: the
# binary is 3.8 MB smaller, and so is its resident text (docs/reports/benchmarks.md).
SHIM_TAGS  := grpcnotrace
BIN      := bin/cri-nstarget

# make run: with CONTAINERD_ADDRESS (e.g. /run/containerd/containerd.sock) the
# shim fronts that containerd; without it, a private containerd is started.
CONTAINERD_ADDRESS ?=
LISTEN             ?= unix:///run/cri-nstarget/cri.sock
STATE_DIR          ?= /run/cri-nstarget
ARGS               ?=

.PHONY: all build deps vet unit fuzz test run demo bench clean

all: build

build: shim
	$(GO) build -o bin/nstarget-lab ./cmd/nstarget-lab

deps:
	$(LEG) ./hack/deps.sh

# The build tags whose files vet and lint check, each with its packages
# (several joined by +), beside the default build's ./...
CHECK_TAGS := integration=./... e2e=./e2e/ node=./e2e/node/ upstream=./e2e/upstream/ \
	failpoints=./server/+./cmd/... soakbreak_intents=./server/ soakbreak_nrigate=./nriplugin/ apiserver=./deploy/
# $(call each_tag,command): command -tags TAG PACKAGES for each of CHECK_TAGS.
each_tag = @set -e; for c in $(CHECK_TAGS); do pkgs="$$(echo $${c\#*=} | tr + ' ')"; \
	echo "$(1) -tags $${c%%=*} $$pkgs"; $(1) -tags $${c%%=*} $$pkgs; done

vet:
	$(GO) vet ./...
	$(call each_tag,$(GO) vet)

# Static checks: gofmt leaves nothing to change, go vet (above), and
# staticcheck at a pinned version (run from the module proxy, never in go.mod).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1
.PHONY: lint
lint: vet
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	$(call each_tag,$(GO) run $(STATICCHECK))

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
	./hack/leg.sh fuzz-criwire $(GO) test -run '^$$' -fuzz '^FuzzCreate$$' $(call fuzz_for,150000) ./criwire
	./hack/leg.sh fuzz-server $(GO) test -run '^$$' -fuzz '^FuzzPlanFor$$' $(call fuzz_for,20000) ./server
	./hack/leg.sh fuzz-pins $(GO) test -run '^$$' -fuzz '^FuzzValidateID$$' $(call fuzz_for,800000) ./pins
	./hack/leg.sh fuzz-oci $(GO) test -run '^$$' -fuzz '^FuzzPatch$$' $(call fuzz_for,400000) ./oci

# The backends, each a containerd built from the Go module proxy into
# /var/cache/cri-nstarget (hack/containerd.sh, once) with the runc its
# release ships with (its script/setup/runc-version; hack/runc.sh), and
# paired with the kubelet that nodes run beside it (Kubernetes' own
# compatibility matrix, containerd's RELEASES.md). Every version is named
# here, once (docs/versions_test.go holds README.md, docs/operations.md,
# docs/testing.md and SECURITY.md to it):
#   backend  containerd                          runc          kubelet
#   2.4      $(CONTAINERD_24)  active to 2027-05     $(RUNC_2)    $(KUBERNETES_NEWEST)
#   2.3      $(CONTAINERD_23)  LTS to 2028-04-30     $(RUNC_2)    $(KUBERNETES_PREVIOUS)
#   2.0      $(CONTAINERD_20)  LTS to 2027-03        $(RUNC_20)   $(KUBERNETES_OLDEST)
#   1.7      $(CONTAINERD_17)  ended 2026-09, best effort (make matrix)  $(RUNC_17)  $(KUBERNETES_OLDEST)
#   2.1      $(CONTAINERD_21)  ended, (make matrix)  Debian's
#   1.6      Debian's 1.6.20, past end of life (make matrix; make run RUN_BACKEND=1.6, the quick one)
# `make test` runs BACKENDS (default: 2.4 2.3 2.0, containerd's supported
# releases); `make matrix` runs MATRIX_BACKENDS (1.7 1.6 2.1): no longer
# supported upstream, kept because they cost CI nothing and a failure there
# is worth knowing, fixed when it is cheap (best effort). A leg is named
# after its backend: integration-containerd-2.4, conformance-containerd-2.3,
# e2e-containerd-2.0, e2e-upstream-containerd-2.4, ...; make integration,
# conformance, e2e and e2e-upstream run theirs on each of BACKENDS.
#
# The window follows containerd's RELEASES.md and Kubernetes' releases
# (docs/operations.md, "How the window moves"): when a Kubernetes minor comes
# out (1.38 is due on 2026-12-16), KUBERNETES_NEWEST moves to it and the
# other two one minor up (kubelets 1.38, 1.37, 1.36 on 2.4, 2.3, 2.0); a
# containerd release leaves BACKENDS for MATRIX_BACKENDS when containerd ends
# its support (2.0: March 2027). containerd's own matrix recommends 2.0 up
# to Kubernetes 1.34, past its end of life: 2.0 is paired with the oldest
# Kubernetes still supported.
#
# Which leg proves what (docs/reports/conformance.md, "What CI proves"):
#   integration-containerd-X   the shim against a real containerd and runc: passthrough, wire fidelity,
#                              targeting, pins, faults, restarts, RuntimeConfig passthrough. On 2.4 and
#                              2.3 the NRI path (NSTARGET_REQUIRE_NRI: a backend without NRI fails),
#                              user namespaces (NSTARGET_REQUIRE_USERNS); on 2.0, whose NRI (v0.8)
#                              cannot adjust namespaces, the Update path (NSTARGET_EXPECT_VIA=update:
#                              the shim must have turned NRI down) and user namespaces; on 1.7 the
#                              Update path, the only one there. h2spec (HTTP/2) on 2.4 only: the
#                              framing is grpc-go's, the shim's own, whatever the backend; the load
#                              test (64 clients of targeted pod lifecycles) for 30 s on 2.4, 10 s on
#                              the others.
#   integration-containerd-2.4-update  the targeting tests again with the shims forced onto the
#                              Update path, on a backend that also has NRI and user namespaces
#   conformance-containerd-X   the TARGET suite (nstarget-conformance, built by the rule make release
#                              ships it with) through the shim on all three, and on containerd alone
#                              (a measurement) on 2.4 and 2.3, and on 2.0 and 1.7 where critest runs;
#                              critest $(CRITEST_VERSION) parity (the same specs pass directly and
#                              through the shim, above a floor) on CRITEST_BACKENDS: 2.4 and 2.3 (the
#                              newest and the LTS) for a leg run alone, 2.4 in make test
#                              (TEST_CRITEST_BACKENDS); `make conformance` adds 2.0 and the matrix.
#                              On 2.4 the plugin mode too: the suite on containerd's own endpoint
#                              with cri-nstarget --mode plugin on its NRI; the cases it claims must
#                              pass and the plugin must have pinned, the others are reported "not
#                              claimed by plugin mode" with the reason (the README's column)
#   e2e-containerd-X           the whole e2e scenario set (kubectl debug --target and the rest of
#                              e2e/) with the backend's kubelet under the newest control plane;
#                              NSTARGET_EXPECT_VIA says which path every targeted create must take
#   e2e-upstream-containerd-X  Kubernetes' own Ephemeral Containers and kubectl debug specs, and the
#                              project's, directly and through the shim, with the backend's kubelet
BACKENDS        ?= 2.4 2.3 2.0
MATRIX_BACKENDS ?= 1.7 1.6 2.1
CONTAINERD_24 ?= v2.4.2
CONTAINERD_23 ?= v2.3.7
CONTAINERD_20 ?= v2.0.14
CONTAINERD_17 ?= v1.7.35
CONTAINERD_21 ?= v2.1.4
# runc: containerd 2.3.7 and 2.4.2 ship with 1.5.2, containerd 2.0.14 and
# 1.7.35 with 1.3.6; 2.1 and 1.6 run Debian's.
RUNC_2  ?= v1.5.2
RUNC_20 ?= v1.3.6
RUNC_24 := $(RUNC_2)
RUNC_23 := $(RUNC_2)
RUNC_17 := $(RUNC_20)
# Kubernetes: the newest release, and the two before it (three minors are
# supported). Only the newest is built whole (kube-apiserver, kubectl,
# kubelet; e2e.test and the controllers for e2e-upstream): an older
# release's kubelet runs under its control plane (kube-apiserver supports
# kubelets three minors older), so the others need their kubelet only
# (hack/kubernetes.sh --kubelet).
KUBERNETES_NEWEST   ?= v1.37.2
KUBERNETES_PREVIOUS ?= v1.36.3
KUBERNETES_OLDEST   ?= v1.35.4
KUBELET_24 := $(KUBERNETES_NEWEST)
KUBELET_23 := $(KUBERNETES_PREVIOUS)
KUBELET_20 := $(KUBERNETES_OLDEST)
KUBELET_17 := $(KUBERNETES_OLDEST)
KUBELET_21 := $(KUBERNETES_OLDEST)
KUBELET_16 := $(KUBERNETES_OLDEST)

# $(call bkey,2.4) is 24, the suffix of the backend's variables.
bkey = $(subst .,,$(1))
# The backend's containerd and runc binaries (as shell text: the cache
# scripts print their directories), and both as the harness's environment.
containerd_bin = $(if $(CONTAINERD_$(call bkey,$(1))),$$(CONTAINERD_VERSION=$(CONTAINERD_$(call bkey,$(1))) ./hack/containerd.sh)/containerd,containerd)
runc_bin       = $(if $(RUNC_$(call bkey,$(1))),$$(RUNC_VERSION=$(RUNC_$(call bkey,$(1))) ./hack/runc.sh)/runc)
backend_env    = NSTARGET_CONTAINERD="$(call containerd_bin,$(1))" $(if $(RUNC_$(call bkey,$(1))),NSTARGET_RUNC="$(call runc_bin,$(1))")
kubelet_bin    = $(call kubernetes,$(KUBELET_$(call bkey,$(1))),--kubelet)/kubelet
# Kubernetes at version $(1), built once into the cache (hack/kubernetes.sh,
# with flags $(2)): the command (kubernetes_sh), and as shell text the
# directory it prints (kubernetes).
kubernetes_sh  = KUBERNETES_VERSION=$(1) ./hack/kubernetes.sh$(if $(2), $(2))
kubernetes     = $$($(call kubernetes_sh,$(1),$(2)))

# What each backend's legs add to the environment and the arguments.
# TestLoad's 64 clients run on the 2.4 and 2.0 legs; the 2.3 and 1.7 legs
# run it with 16 (each client's one lifecycle takes about a second per four
# clients on 2 cores, so 64 cost about 60 s a leg and 16 about 15 s). On
# 2.0 with 16, once, one shim goroutine more than before was left 10 s
# after the load (cause not found): 2.0 keeps 64 until it is.
INTEGRATION_ENV_24 := NSTARGET_H2SPEC=$(CURDIR)/bin/h2spec NSTARGET_REQUIRE_USERNS=1 NSTARGET_REQUIRE_NRI=1
INTEGRATION_ENV_23 := NSTARGET_H2SPEC=off NSTARGET_REQUIRE_USERNS=1 NSTARGET_REQUIRE_NRI=1 NST_LOAD_SECONDS=10 NST_LOAD_CLIENTS=16
INTEGRATION_ENV_20 := NSTARGET_H2SPEC=off NSTARGET_REQUIRE_USERNS=1 NSTARGET_EXPECT_VIA=update NST_LOAD_SECONDS=10
INTEGRATION_ENV_17 := NSTARGET_H2SPEC=off NST_LOAD_SECONDS=10 NST_LOAD_CLIENTS=16
INTEGRATION_ENV_21 := NSTARGET_H2SPEC=$(CURDIR)/bin/h2spec
INTEGRATION_ENV_16 := NSTARGET_H2SPEC=off
E2E_ENV_24 := NSTARGET_REQUIRE_USERNS=1 NSTARGET_EXPECT_VIA=nri
E2E_ENV_23 := NSTARGET_REQUIRE_USERNS=1 NSTARGET_EXPECT_VIA=nri
E2E_ENV_20 := NSTARGET_REQUIRE_USERNS=1 NSTARGET_EXPECT_VIA=update
E2E_ENV_17 := NSTARGET_EXPECT_VIA=update
E2E_ENV_16 := NSTARGET_EXPECT_VIA=update
# critest's floor is what a run passed both ways (nstarget-matrix records the
# same): on 2.4 every UserNamespaces and NRI spec critest does not skip itself
# included; on 2.3 the same less the pod sandbox metrics spec (2.3 lists no
# container_threads metric); its NRI specs (--critest-nri: a plugin of its own on
# containerd's NRI socket, alone directly, beside the shim's through the
# shim) on 2.4 and 2.3. The suite's strict and Update-path modes on 2.4
# (the shim's own behaviour, the same on every backend), and the plugin mode
# (issue 49: containerd's own endpoint, cri-nstarget --mode plugin on its NRI;
# the cases it does not claim reported as such) on 2.4, in the leg's
# containerd: about 15 s. On 2.3: nstarget-matrix run --modes plugin.
CRITEST_BACKENDS ?= 2.4 2.3
# `make test` (CI, stopped at 90 minutes on a machine that may be new) runs
# the same legs on every backend but two: critest parity and Kubernetes' own
# specs run on the newest (TEST_CRITEST_BACKENDS, TEST_UPSTREAM_BACKENDS).
# critest parity on 2.3 and 1.7 (`make conformance`) and the upstream specs
# with kubelets 1.36 and 1.35 (`make e2e-upstream`, 1.35 then beside 1.7)
# passed on 2026-11-27 (docs/reports/conformance.md); they cost CI about 8
# more minutes warm. critest parity on 2.0.14 (105 specs both ways, no NRI or
# sandbox metrics specs) passed on 2026-12-06.
TEST_CRITEST_BACKENDS  ?= 2.4
TEST_UPSTREAM_BACKENDS ?= 2.4
CRITEST_MIN_PASS_CONTAINERD24 ?= 124
CRITEST_MIN_PASS_CONTAINERD23 ?= 123
CONFORMANCE_ARGS_24 := --critest-min-pass $(CRITEST_MIN_PASS_CONTAINERD24) --critest-nri --modes direct,shim,shim-strict,shim-update,plugin
CONFORMANCE_ARGS_23 := --critest-min-pass $(CRITEST_MIN_PASS_CONTAINERD23) --critest-nri --modes direct,shim
# On 2.0 and 1.7 the suite through the shim only, unless critest runs there
# (make conformance): what containerd does alone is a measurement, which
# decides nothing (docs/reports/conformance.md has it from make conformance).
# Both take the Update path, so shim-update would repeat shim. On 2.0 the
# suite's pods are on a pod network (a CNI bridge): containerd 2.0 cannot run
# a user-namespaced pod on the host network (it pins the user namespace
# through the pod's network namespace; "failed to pin user namespace"),
# which Kubernetes never asks for, and its user-namespace cases are required.
comma := ,
conformance_shim_only = $(if $(filter $(1),$(CRITEST_BACKENDS)),--modes direct$(comma)shim,--modes shim)
CRITEST_MIN_PASS_CONTAINERD20 ?= 105
CONFORMANCE_ARGS_20 = $(call conformance_shim_only,2.0) --suite-pod-network-mode pod --critest-min-pass $(CRITEST_MIN_PASS_CONTAINERD20)
CONFORMANCE_ARGS_17 = $(call conformance_shim_only,1.7)

# h2spec (HTTP/2 conformance) for integration/h2spec_test.go, built into bin/
# from its own module (hack/h2spec/go.mod), so it never enters go.mod:
# v2.2.1+incompatible, the newest the module path serves (later tags have a
# go.mod without /v2), with its imports (x/net, cobra, color) pinned there.
.PHONY: h2spec-tool
h2spec-tool:
	cd hack/h2spec && $(GO) build -o ../../bin/h2spec github.com/summerwind/h2spec/cmd/h2spec

# The targeting tests, again with every shim forced onto the Update path
# (--targeting-via update) on containerd 2.4, where they otherwise take NRI.
UPDATE_PATH_TESTS ?= Target|IPC|UserNamespaced|PIDReuse|Crash|Pins|Refus|Prefix|Stopped|Wire
.PHONY: integration-containerd-2.4-update
integration-containerd-2.4-update: deps build
	$(call backend_env,2.4) NSTARGET_REQUIRE_USERNS=1 NSTARGET_SHIM_FLAGS="--targeting-via update" \
		$(LEG) $(GO) test -tags integration -count=1 -v -timeout 10m -run '$(UPDATE_PATH_TESTS)' -skip 'TestNRI|TestPluginMode' ./integration/

# End to end with a real kubelet (e2e/, internal/cluster): a private
# containerd, the shim in front of it, and on 127.0.0.1 etcd (Debian's
# etcd-server, unpacked into the cache by hack/etcd.sh, never installed),
# kube-apiserver $(KUBERNETES_NEWEST) and the backend's kubelet, whose runtime
# is the shim; kubectl debug --target and the rest of e2e/*_test.go, then a
# teardown that must leave the machine as found. Kubernetes is built from the
# module proxy (hack/kubernetes.sh, once) into /var/cache/cri-nstarget.
# TestCRIListStreaming needs a kubelet of 1.36 or later (its gate); it runs
# on 2.4, which implements the streaming lists, and on 2.3, which answers
# them Unimplemented (the kubelet's fallback).
kube_env = NSTARGET_KUBERNETES_BIN="$(call kubernetes,$(KUBERNETES_NEWEST))" \
	NSTARGET_ETCD="$$(./hack/etcd.sh)/etcd" NSTARGET_SHIM_BINARY=$(CURDIR)/$(BIN)
E2E_TEST = $(GO) test -tags e2e -count=1 -v -timeout 15m -parallel 8 ./e2e/
# The newest release whole, each backend's kubelet (one build at a time), etcd.
.PHONY: e2e-tools
e2e-tools: deps build
	$(call kubernetes_sh,$(KUBERNETES_NEWEST)) >/dev/null
	for v in $(sort $(foreach b,$(BACKENDS),$(KUBELET_$(call bkey,$(b))))); do \
		$(call kubernetes_sh,$$v,--kubelet) >/dev/null || exit 1; done
	./hack/etcd.sh >/dev/null

# The Helm chart (charts/cri-nstarget) against deploy/, with Helm's and
# kustomize's own libraries (hack/chart, a module of its own: neither
# enters go.mod; no helm binary): helm lint --strict; its render with the
# default values the objects kustomize builds of deploy/ (in cleanup
# mode, of deploy/cleanup/; in plugin mode, of deploy/plugin/), but for
# Helm's own labels; every object labelled with the version; each value
# (image, digest, node selector, restart slots, timeouts) reaching the
# installer, or the plugin; deploy.LeastPrivilege on the renders
# (deploy.PluginLeastPrivilege in plugin mode); make release's copies
# (nstarget-chart). About 3 s once
# built; the first build of Helm about 2 minutes.
.PHONY: chart-check
chart-check:
	$(LEG) $(GO) -C hack/chart test -count=1 .

# The cluster install's admission policy (deploy/install/admission.yaml) on
# a real kube-apiserver $(KUBERNETES_NEWEST) and etcd (internal/cluster, no
# kubelet): deploy/install applied, two Nodes, and a token of the installer's
# pod bound to one of them may set that Node's cri-nstarget.io/state and
# nothing else (deploy/admission_test.go, build tag apiserver). About 6 s
# once Kubernetes is built (the e2e legs build it: hack/kubernetes.sh).
.PHONY: deploy-admission
deploy-admission: deps
	NSTARGET_KUBERNETES_BIN="$(call kubernetes,$(KUBERNETES_NEWEST))" NSTARGET_ETCD="$$(./hack/etcd.sh)/etcd" \
		$(LEG) $(GO) test -tags apiserver -count=1 -v -timeout 5m ./deploy/

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
# (docs/reports/reliability.md, Soak); the components' logs go to bin/soak/.
#   make soak                            30 minutes on containerd $(CONTAINERD_24) (NRI)
#   make soak SOAK_DURATION=3m           a smoke run
#   make soak SOAK_BACKEND=2.0           on containerd $(CONTAINERD_20) (the Update path); any of BACKENDS,
#                                        each with its kubelet (KUBELET_xx), the control plane $(KUBERNETES_NEWEST)
#   make soak SOAK_SEED=N                the schedule and workload of seed N again
#   make soak SOAK_BREAK=intents|nrigate a deliberately broken shim (build tag
#                                        soakbreak_*): the run must FAIL
#   SOAK_ARGS="--faults K1,K2 --fault-every 20s"  only these faults, this often
SOAK_DURATION ?= 30m
SOAK_SEED     ?=
SOAK_BACKEND  ?= 2.4
SOAK_BREAK    ?=
SOAK_ARGS     ?=
.PHONY: soak
soak: deps build
	$(GO) build -o bin/nstarget-soak ./cmd/nstarget-soak
	./bin/nstarget-soak --duration $(SOAK_DURATION) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) $(if $(SOAK_BREAK),--break $(SOAK_BREAK)) \
		--shim-binary $(BIN) --kubernetes-bin "$(call kubernetes,$(KUBERNETES_NEWEST))" \
		--kubelet "$(call kubelet_bin,$(SOAK_BACKEND))" \
		--etcd "$$(./hack/etcd.sh)/etcd" --containerd "$(call containerd_bin,$(SOAK_BACKEND))" \
		--runc "$(call runc_bin,$(SOAK_BACKEND))" --logs $(CURDIR)/bin/soak $(SOAK_ARGS)

# Kubernetes' own e2e specs through the shim (issue 26; e2e/upstream,
# internal/upstream): e2e.test $(KUBERNETES_NEWEST) (hack/kubernetes.sh
# --upstream-e2e, ~10 min once) against the e2e cluster with its
# kube-controller-manager and kube-scheduler and the backend's kubelet, the
# specs' images (busybox, nginx, agnhost, pause) built here and served under
# their registry.k8s.io names; then the project's own specs on the same
# framework (e2e/kubetest, built into $(PROJECT_E2E) by hack/kubernetes.sh
# --project-e2e). Each run directly and through the shim; the parity table
# (spec, direct, shim, time) ends the output. Every spec that passes directly
# must pass through the shim. Reports, tables and logs:
# bin/e2e-upstream/containerd-X/.
#   make e2e-upstream-containerd-X       the two Ephemeral Containers [Conformance] specs,
#                                        the kubectl debug ones and the project's --target spec
#   ... UPSTREAM_FOCUS=RE                other specs (a ginkgo focus regexp);
#                                        UPSTREAM_PROCS=N runs them in N processes
UPSTREAM_FOCUS ?=
UPSTREAM_SKIP  ?=
UPSTREAM_PROCS ?= 1
UPSTREAM_TIMEOUT ?= 20m
UPSTREAM_OUT   ?= bin/e2e-upstream
# The run with the kubelet on containerd directly (the baseline) is kept in
# UPSTREAM_DIRECT_CACHE under a key of all it depends on (upstream.DirectKey:
# e2e.test, nstarget-e2e.test, the kubelet, the control plane, etcd,
# containerd, runc, the CNI plugins, by content; the configuration the rig
# gives containerd and the cluster (harness.NodeConfig, cluster.NodeConfig:
# not the rig's code, so a change to internal/harness that leaves it alone
# keeps the key); the images, the focus, skip, processes, bound, versions and
# kernel) and reused while the key holds; the run through the shim always
# runs. UPSTREAM_DIRECT_CACHE= runs both every time.
UPSTREAM_DIRECT_CACHE ?= /var/cache/cri-nstarget/e2e-upstream-direct
UPSTREAM_TEST   = $(GO) test -tags upstream -count=1 -v -timeout 0 ./e2e/upstream/
upstream_env    = $(kube_env) NSTARGET_UPSTREAM_FOCUS='$(UPSTREAM_FOCUS)' NSTARGET_UPSTREAM_DIRECT_CACHE='$(UPSTREAM_DIRECT_CACHE)' \
	NSTARGET_UPSTREAM_SKIP='$(UPSTREAM_SKIP)' NSTARGET_UPSTREAM_PROCS=$(UPSTREAM_PROCS) NSTARGET_UPSTREAM_TIMEOUT=$(UPSTREAM_TIMEOUT) \
	NSTARGET_UPSTREAM_OUT=$(CURDIR)/$(UPSTREAM_OUT)/$(1) $(if $(PROJECT_E2E),NSTARGET_PROJECT_E2E=$(CURDIR)/$(PROJECT_E2E))
PROJECT_E2E    ?= bin/nstarget-e2e.test
.PHONY: e2e-upstream-tools
e2e-upstream-tools: e2e-tools
	$(call kubernetes_sh,$(KUBERNETES_NEWEST),--upstream-e2e) >/dev/null
	$(if $(PROJECT_E2E),$(call kubernetes_sh,$(KUBERNETES_NEWEST),--project-e2e $(PROJECT_E2E)) >/dev/null)

# Each backend's legs. $(LEG) names a leg after its target.
define backend_legs
.PHONY: integration-containerd-$(1) conformance-containerd-$(1) e2e-containerd-$(1) e2e-upstream-containerd-$(1)
integration-containerd-$(1): deps build h2spec-tool
	$$(call backend_env,$(1)) $$(INTEGRATION_ENV_$(call bkey,$(1))) \
		$$(LEG) $$(GO) test -tags integration -count=1 -v -timeout 20m ./internal/harness/ ./integration/
conformance-containerd-$(1): deps conformance-tools
	$$(if $$(RUNC_$(call bkey,$(1))),NSTARGET_RUNC="$$(call runc_bin,$(1))") $$(LEG) $$(CONFORMANCE_RUN) --backend containerd-$(1) \
		--containerd "$$(call containerd_bin,$(1))" $$(if $$(filter $(1),$$(CRITEST_BACKENDS)),$$(CRITEST_ARGS)) $$(CONFORMANCE_ARGS_$(call bkey,$(1)))
e2e-containerd-$(1): e2e-tools
	$$(kube_env) NSTARGET_KUBELET="$$(call kubelet_bin,$(1))" $$(call backend_env,$(1)) $$(E2E_ENV_$(call bkey,$(1))) \
		NSTARGET_E2E_LOGS=$$(CURDIR)/bin/e2e/containerd-$(1) $$(LEG) $$(E2E_TEST)
e2e-upstream-containerd-$(1): e2e-upstream-tools
	rm -rf $$(UPSTREAM_OUT)/containerd-$(1)
	$$(call upstream_env,containerd-$(1)) NSTARGET_KUBELET="$$(call kubelet_bin,$(1))" $$(call backend_env,$(1)) \
		$$(LEG) $$(UPSTREAM_TEST); rc=$$$$?; cat $$(UPSTREAM_OUT)/containerd-$(1)/parity.txt 2>/dev/null; exit $$$$rc
endef
$(foreach b,$(BACKENDS) $(MATRIX_BACKENDS),$(eval $(call backend_legs,$(b))))

.PHONY: integration e2e e2e-upstream matrix
integration: $(addprefix integration-containerd-,$(BACKENDS))
e2e: $(addprefix e2e-containerd-,$(BACKENDS))
e2e-upstream: $(addprefix e2e-upstream-containerd-,$(BACKENDS))
# `make matrix` (outside `make test`): integration and conformance (with
# critest) on the matrix backends.
matrix:
	$(MAKE) $(foreach b,$(MATRIX_BACKENDS),integration-containerd-$(b) conformance-containerd-$(b)) CRITEST_BACKENDS="$(MATRIX_BACKENDS)"

# Every [NodeConformance] spec of e2e.test $(KUBERNETES_NEWEST), the same way
# (directly and through the shim, on each of BACKENDS), in ginkgo's parallel
# processes ([Serial] specs alone at the end), outside `make test`: about
# 55 minutes per run, two runs per backend (BACKENDS=2.4 for one). Specs
# that fail directly need their reason in e2e/upstream/known-failures.txt.
# Tables: bin/node-conformance/BACKEND/parity.txt; docs/reports/conformance.md's
# table is made from them by
#   bin/nstarget-matrix upstream --docs docs/reports/conformance.md bin/node-conformance
NODE_CONFORMANCE_PROCS ?= 12
.PHONY: node-conformance
node-conformance:
	$(MAKE) e2e-upstream UPSTREAM_FOCUS='\[NodeConformance\]' UPSTREAM_PROCS=$(NODE_CONFORMANCE_PROCS) \
		UPSTREAM_TIMEOUT=100m UPSTREAM_OUT=bin/node-conformance PROJECT_E2E=

# Each leg of `make test` prints its time (hack/leg.sh; .ci/run lists them all),
# and so do deps, fuzz (each target) and install-check.
# Per backend: integration, conformance, e2e, e2e-upstream (in that order, so
# that the cheaper legs fail first); then the node. `unit` is not among them:
# `race` runs the same tests (go test ./..., no test skips itself under the
# race detector), so a second run without it showed nothing more (70 s).
LEG = ./hack/leg.sh $@
test: CRITEST_BACKENDS = $(TEST_CRITEST_BACKENDS)
test: deps lint race chart-check deploy-admission fuzz install-check release-check \
	$(foreach b,$(BACKENDS),integration-containerd-$(b) $(if $(filter 2.4,$(b)),integration-containerd-2.4-update) conformance-containerd-$(b)) \
	$(addprefix e2e-containerd-,$(BACKENDS)) $(addprefix e2e-upstream-containerd-,$(filter $(TEST_UPSTREAM_BACKENDS),$(BACKENDS))) \
	$(if $(filter 2.4,$(BACKENDS)),node-e2e)

# make run: a private containerd, RUN_BACKEND (default 2.4, the newest
# supported: containerd $(CONTAINERD_24) with runc $(RUNC_24), built once into
# /var/cache/cri-nstarget, a few minutes the first time, with its progress
# shown; 2.3, 2.0 and 1.7 likewise; 1.6: Debian's 1.6.20 at once, past end of
# life), or with CONTAINERD_ADDRESS the containerd there; and the pinned
# crictl (cri-tools $(CRITEST_VERSION)) in bin/, which Debian does not package.
RUN_BACKEND ?= 2.4
.PHONY: crictl
crictl:
	cd hack/critest && CGO_ENABLED=0 $(GO) build -trimpath -o ../../bin/crictl sigs.k8s.io/cri-tools/cmd/crictl

run: deps build crictl
ifeq ($(CONTAINERD_ADDRESS),)
	$(call backend_env,$(RUN_BACKEND)) ./bin/nstarget-lab run --shim $(BIN) --crictl $(CURDIR)/bin/crictl \
		--listen $(LISTEN) --state-dir $(STATE_DIR) $(ARGS)
else
	@echo "Try: $(CURDIR)/bin/crictl --runtime-endpoint $(LISTEN) version"
	./$(BIN) --listen $(LISTEN) --runtime-endpoint unix://$(CONTAINERD_ADDRESS) \
		--containerd-address $(CONTAINERD_ADDRESS) --state-dir $(STATE_DIR) $(ARGS)
endif

demo: deps build
	$(call backend_env,$(RUN_BACKEND)) ./bin/nstarget-lab demo --shim $(BIN)

# The shim and a byte splice (the floor of any proxy) against the containerd
# behind them, interleaved in one run; ends with the table of docs/reports/benchmarks.md
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
	$(GO) run ./cmd/nstarget-bench events --shim-binary $(BIN) --kubernetes-bin "$(call kubernetes,$(KUBERNETES_NEWEST))" \
		--etcd "$$(./hack/etcd.sh)/etcd" $(BENCH_EVENTS_ARGS)

# The TARGET create measure on one backend (BENCH_BACKEND: 2.4, the NRI
# path, by default; 2.0 or 1.7 for the Update path), with the proxy's hop measured
# in the same rounds (Version through the shim and direct, one each a round)
# and the shim's garbage collection over them; about 4 minutes at 300 rounds.
# BENCH_TARGET_ARGS e.g. "-count 100 -steps".
BENCH_BACKEND     ?= 2.4
BENCH_TARGET_ARGS ?= -count 300
.PHONY: bench-target
bench-target: deps build
	$(call backend_env,$(BENCH_BACKEND)) $(GO) run ./cmd/nstarget-bench -shim-binary $(BIN) -only target $(BENCH_TARGET_ARGS)

# The plugin mode's TARGET create and memory (issue 49; docs/reports/benchmarks.md):
# two private containerds $(CONTAINERD_24), cri-nstarget --mode plugin attached
# to one, a pid TARGET create on each in turn, first with the plugin attached to
# neither (the control); the difference pairwise (p50, p90) and the plugin's
# VmRSS/VmHWM after the creates. Not part of make test; about 4 minutes with
# the defaults. BENCH_PLUGIN_ARGS e.g. "-count 50 -control 20".
BENCH_PLUGIN_ARGS ?=
.PHONY: bench-plugin
bench-plugin: deps build
	$(call backend_env,2.4) $(GO) run ./cmd/nstarget-bench plugin -shim-binary $(BIN) $(BENCH_PLUGIN_ARGS)

# A busy node's steady state (docs/reports/benchmarks.md): a kubelet
# $(KUBERNETES_NEWEST) with 100 running pods, its endpoint the shim and then
# containerd directly (slices A B B A), on containerd $(CONTAINERD_24) with runc
# $(RUNC_24): the shim's CPU against containerd's, its RSS, the kubelet's CRI
# latencies both ways, then a CPU profile of the shim (perf). Outside make
# test: about 30 minutes with the defaults (10 minutes a side). Output in
# bin/bench-node. BENCH_NODE_ARGS e.g. "-duration 1m -pods 20 -warmup 20s
# -profile 20s" (a smoke run, about 6 minutes).
BENCH_NODE_ARGS ?=
.PHONY: bench-node
bench-node: deps build
	$(call backend_env,2.4) $(GO) run ./cmd/nstarget-bench node -shim-binary $(BIN) \
		-kubernetes-bin "$(call kubernetes,$(KUBELET_24))" -etcd "$$(./hack/etcd.sh)/etcd" $(BENCH_NODE_ARGS)

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
	MAKE="$(MAKE)" $(LEG) ./hack/install-check.sh

# nstarget-conformance, the TARGET suite (conformance/) as it ships: a static
# test binary (go test -c, as critest is built), stripped and stamped with
# VERSION. The one rule for it: make release builds it through
# install-conformance for each arch, and the conformance legs run what it
# builds here (conformance-tools), so CI runs the shipped build.
#   make install-conformance [PREFIX=...] [DESTDIR=...]   the binary, its man page, docs/qualify.md
#   make uninstall-conformance
CONFORMANCE_BIN     ?= bin/nstarget-conformance
CONFORMANCE_DOCDIR  ?= $(PREFIX)/share/doc/cri-nstarget-conformance
CONFORMANCE_LDFLAGS := $(EXTRA_LDFLAGS) -s -w -X github.com/cri-nstarget/cri-nstarget/conformance.version=$(VERSION)
.PHONY: conformance-suite install-conformance uninstall-conformance
conformance-suite:
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags "$(CONFORMANCE_LDFLAGS)" -o $(CONFORMANCE_BIN) ./conformance

install-conformance: conformance-suite
	install -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(CONFORMANCE_DOCDIR)
	install -m 0755 $(CONFORMANCE_BIN) $(DESTDIR)$(BINDIR)/nstarget-conformance
	install -m 0644 docs/nstarget-conformance.8 $(DESTDIR)$(MANDIR)/man8/nstarget-conformance.8
	install -m 0644 docs/qualify.md LICENSE $(DESTDIR)$(CONFORMANCE_DOCDIR)/

uninstall-conformance:
	rm -f $(DESTDIR)$(BINDIR)/nstarget-conformance $(DESTDIR)$(MANDIR)/man8/nstarget-conformance.8 \
		$(DESTDIR)$(CONFORMANCE_DOCDIR)/qualify.md $(DESTDIR)$(CONFORMANCE_DOCDIR)/LICENSE
	-@rmdir $(DESTDIR)$(CONFORMANCE_DOCDIR) 2>/dev/null || true

# config/default.toml is what `cri-nstarget config default` prints (a unit test checks).
config/default.toml: config/config.go
	$(GO) run ./cmd/cri-nstarget config default >$@.tmp && mv $@.tmp $@

# make docs: what is made from config/config.go (the settings: key, flag,
# default, meaning) and the binary's own flags: config/default.toml and the
# reference of flags and keys in docs/operations.md and docs/cri-nstarget.8, between
# their GENERATED markers. Unit tests fail when any of them is stale.
.PHONY: docs
docs: config/default.toml
	$(GO) test -count=1 -run '^TestReference$$' ./cmd/cri-nstarget -update

# Conformance (docs/reports/conformance.md): the TARGET suite (conformance/, any CRI
# endpoint) and critest $(CRITEST_VERSION), against a private containerd, directly and
# through the shim; critest must pass the same specs both ways.
#   make conformance-containerd-X   one backend (above): the suite, and critest on CRITEST_BACKENDS
#   make conformance                every backend, BACKENDS and MATRIX_BACKENDS, each with critest,
#                                   then the tables in docs/reports/conformance.md
# critest and its stand-in binary are built from their own module
# (hack/critest/go.mod), so their dependencies never touch go.mod; with
# -trimpath and no VCS stamp, so that a build in any clone at any commit is
# the same bytes (the direct run's key hashes them).
# critest's version is named once, in hack/critest/go.mod.
CRITEST_VERSION := $(shell sed -n 's|^require sigs.k8s.io/cri-tools \(v[^ ]*\).*|\1|p' hack/critest/go.mod)
CONFORMANCE_OUT ?= bin/conformance
CRITEST_SKIP    ?= hack/critest/skip.txt
CONFORMANCE_RUN  = bin/nstarget-matrix run --shim $(BIN) --suite $(CONFORMANCE_BIN) --out $(CONFORMANCE_OUT)
# critest's direct run (against containerd alone, the baseline) is kept in
# CRITEST_DIRECT_CACHE under a key of all it depends on and reused while the
# key holds (nstarget-matrix --critest-direct-cache); the run through the
# shim always runs. CRITEST_DIRECT_CACHE= runs both every time.
CRITEST_DIRECT_CACHE ?= /var/cache/cri-nstarget/critest-direct
CRITEST_ARGS     = --critest bin/critest --critest-standin bin/critest-standin --critest-skip $(CRITEST_SKIP) \
	--critest-busybox "$$(./hack/busybox-full.sh)" --critest-direct-cache "$(CRITEST_DIRECT_CACHE)"

.PHONY: conformance conformance-tools conformance-report

conformance-tools: build conformance-suite
	$(GO) build -o bin/nstarget-matrix ./cmd/nstarget-matrix
	cd hack/critest && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -o ../../bin/critest-standin ./standin
	cd hack/critest && $(GO) build -trimpath -buildvcs=false -o ../../bin/ginkgo github.com/onsi/ginkgo/v2/ginkgo
	cd hack/critest && $(GO) test -c -trimpath -buildvcs=false -o ../../bin/critest \
		-ldflags "-X sigs.k8s.io/cri-tools/pkg/version.Version=$(CRITEST_VERSION)" sigs.k8s.io/cri-tools/cmd/critest

conformance:
	$(MAKE) $(foreach b,$(BACKENDS) $(MATRIX_BACKENDS),conformance-containerd-$(b)) CRITEST_BACKENDS="$(BACKENDS) $(MATRIX_BACKENDS)"
	$(MAKE) conformance-report

conformance-report:
	bin/nstarget-matrix report --docs docs/reports/conformance.md --readme README.md $(CONFORMANCE_OUT)

# critest -benchmark (docs/reports/benchmarks.md), nstarget-bench's critest mode:
# critest's benchmark specs against a private containerd 1.6, directly
# and through the shim, in alternating rounds, then a side-by-side table
# (bin/bench-critest/summary.md).
# About 2.5 minutes; BENCH_CRITEST_ARGS e.g. "-rounds 12 -pods 40 -containers 40 -images 40" (about 7).
BENCH_CRITEST_ARGS ?=
.PHONY: bench-critest
bench-critest: deps conformance-tools
	$(GO) run ./cmd/nstarget-bench critest --shim-binary $(BIN) --critest bin/critest --critest-standin bin/critest-standin \
		--critest-busybox "$$(./hack/busybox-full.sh)" --containerd containerd --out bin/bench-critest $(BENCH_CRITEST_ARGS)

# Release artifacts for node image bakers (docs/node-images.md), into
# $(DIST): static binaries (CGO off, -trimpath, stamped),
# tarballs of make install's tree with sha256sum files, a .deb and an .rpm
# (nfpm v2.45.2, built from its own module, hack/nfpm/go.mod) per
# architecture; the same of nstarget-conformance (make install-conformance,
# the package cri-nstarget-conformance); RELEASE-NOTES.md and the packages'
# changelogs made from VERSION's entry in CHANGELOG.md (cmd/nstarget-changelog:
# a version without one is refused); and SHA256SUMS. hack/release.sh says
# what each holds.
#   make release [VERSION=vX.Y.Z] [RELEASE_ARCHES="amd64 arm64"] [ALLOW_DIRTY=1]
#                (VERSION: CHANGELOG.md's newest release unless given)
#                [UNRELEASED=1: a test build of a prerelease takes CHANGELOG.md's Unreleased section]
#   make release-check   builds CHANGELOG.md's newest release twice and compares, verifies
#                        checksums and ELF arches, checks the notes and changelogs against
#                        CHANGELOG.md, lints the .debs, installs, removes and purges them (in a
#                        throw-away overlay of /), and runs the image-baker recipes of
#                        docs/node-images.md
DIST           ?= dist
RELEASE_ARCHES ?= amd64 arm64
.PHONY: release release-check print-version
release:
	VERSION="$(VERSION)" DIST="$(DIST)" RELEASE_ARCHES="$(RELEASE_ARCHES)" GO="$(GO)" MAKE="$(MAKE)" ./hack/release.sh

release-check: deps
	GO="$(GO)" MAKE="$(MAKE)" $(LEG) ./hack/release-check.sh

# The version the build stamps (VERSION, above), for scripts and for
# cmd/nstarget-changelog's TestMakefileVersion.
print-version:
	@echo $(VERSION)

# A real node under qemu (issue 25; e2e/node, internal/node): Debian 12 with
# systemd as PID 1 on cgroup v2, built from Debian's packages only and cached
# (hack/node/image.sh, about 3 min once), booted under TCG (NODE_ACCEL=kvm
# only where /dev/kvm works for real). Inside it, as a baker would: the .deb
# of this tree installed with dpkg, containerd with the systemd cgroup
# driver, kubelet $(KUBERNETES_NEWEST) with cgroupDriver systemd and the default
# failCgroupV1 (so it proves cgroup v2), started by their units; the control
# plane (etcd, kube-apiserver) runs on the host, at 10.0.2.2 for the guest.
#   make node-e2e        (part of make test) containerd $(CONTAINERD_24) with runc $(RUNC_24), the guest
#                        on NODE_CPUS vCPUs: first the plugin mode (deploy/plugin: kubectl apply -k,
#                        debug --target pinned and verified by it, delete -k leaving nothing on the host,
#                        the kubelet never restarted), then the cluster install (deploy/: a DaemonSet, the
#                        controllers on the host) on the kubelet on containerd: a shim healthy but
#                        NotReady through it rolled back by the installer after the kubelet's restart,
#                        one that cannot create containers with its installer killed after the
#                        kubelet's restart rolled back by the host's guard (internal/badshim), the
#                        install with its installer killed after the kubelet's
#                        restart, kubectl debug --target, the journal's fields and priorities, restarts
#                        of the shim (systemctl, kill -9) and of containerd, an upgrade, the cleanup;
#                        then the package installed: Ready through the shim, kubectl debug --target
#   make node-e2e-full   every scenario on containerd $(CONTAINERD_24) and on Debian's 1.6.20: the
#                        above and a shim never healthy rolled back before the kubelet is touched,
#                        then package life (upgrade while running, remove, purge, reinstall)
#                        and a reboot on the same disk
#   make node-boot-check boot the image and check systemd, cgroup v2, the share, 10.0.2.2
# Each step prints its time; consoles and journals go to bin/node/.
NODE_ACCEL ?= tcg
NODE_CPUS  ?= 2
NODE_AGENT := bin/node/nstarget-node-agent
NODE_LEG    = ./hack/leg.sh
# The two packages the node installs, built from this tree (ALLOW_DIRTY: a
# test build; its stamp says -dirty when the tree is): the first, then the
# upgrade.
NODE_DEB_VERSIONS := v0.0.0-node.1 v0.0.0-node.2
# The cluster install's images whose shim is healthy but useless
# (internal/badshim, one mode each): the node NotReady through it, and no
# container created through it.
NODE_BADSHIMS     := notready nocreate
NODE_E2E_SHORT    := TestNode/containerd-$(patsubst v%,%,$(CONTAINERD_24))/^(base|plugin|cluster-(notready|guard|install|upgrade|cleanup)|install|debug|logs|restarts)$$
.PHONY: node-image node-boot-check node-tools node-e2e node-e2e-full
node-image:
	$(NODE_LEG) $@ ./hack/node/image.sh
node-boot-check: node-image
	$(NODE_LEG) node-agent env CGO_ENABLED=0 $(GO) build -trimpath -o $(NODE_AGENT) ./internal/nodeagent
	NSTARGET_NODE_IMAGE="$$(./hack/node/image.sh)" NSTARGET_NODE_AGENT=$(CURDIR)/$(NODE_AGENT) \
		NSTARGET_NODE_ACCEL=$(NODE_ACCEL) NSTARGET_NODE_LOGS=$(CURDIR)/bin/node \
		$(NODE_LEG) $@ $(GO) test -count=1 -v -run '^TestBoot$$' ./internal/node/
node-tools: deps node-image crictl
	$(NODE_LEG) node-agent env CGO_ENABLED=0 $(GO) build -trimpath -o $(NODE_AGENT) ./internal/nodeagent
	for v in $(NODE_DEB_VERSIONS); do \
		$(MAKE) --no-print-directory release VERSION=$$v RELEASE_ARCHES=amd64 DIST=bin/node/dist-$$v ALLOW_DIRTY=1 UNRELEASED=1 >/dev/null || exit 1; \
	done
	$(MAKE) --no-print-directory image VERSION=$(word 1,$(NODE_DEB_VERSIONS)) IMAGE_VERSION=v0.0.0-node.bad IMAGE_OUT=bin/node/image-bad \
		IMAGE_SHIM=$(NODE_AGENT) >/dev/null
	for m in $(NODE_BADSHIMS); do \
		env CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.mode=$$m" -o bin/node/badshim-$$m ./internal/badshim || exit 1; \
		$(MAKE) --no-print-directory image VERSION=$(word 1,$(NODE_DEB_VERSIONS)) IMAGE_VERSION=v0.0.0-node.$$m IMAGE_OUT=bin/node/image-$$m \
			IMAGE_SHIM=bin/node/badshim-$$m >/dev/null || exit 1; \
	done
	$(call kubernetes_sh,$(KUBERNETES_NEWEST),--upstream-e2e) >/dev/null
node_env = NSTARGET_NODE_IMAGE="$$(./hack/node/image.sh)" NSTARGET_NODE_AGENT=$(CURDIR)/$(NODE_AGENT) \
	NSTARGET_NODE_ACCEL=$(NODE_ACCEL) NSTARGET_NODE_CPUS=$(NODE_CPUS) NSTARGET_NODE_LOGS=$(CURDIR)/bin/node \
	NSTARGET_NODE_DEB="$$(ls $(CURDIR)/bin/node/dist-$(word 1,$(NODE_DEB_VERSIONS))/cri-nstarget_*_amd64.deb)" \
	NSTARGET_NODE_DEB_UPGRADE="$$(ls $(CURDIR)/bin/node/dist-$(word 2,$(NODE_DEB_VERSIONS))/cri-nstarget_*_amd64.deb)" \
	NSTARGET_NODE_CRICTL=$(CURDIR)/bin/crictl \
	NSTARGET_NODE_IMAGE_V1="$$(ls $(CURDIR)/bin/node/dist-$(word 1,$(NODE_DEB_VERSIONS))/*.oci.tar)" \
	NSTARGET_NODE_IMAGE_V2="$$(ls $(CURDIR)/bin/node/dist-$(word 2,$(NODE_DEB_VERSIONS))/*.oci.tar)" \
	NSTARGET_NODE_IMAGE_BAD=$(CURDIR)/bin/node/image-bad/oci \
	NSTARGET_NODE_IMAGE_NOTREADY=$(CURDIR)/bin/node/image-notready/oci NSTARGET_NODE_IMAGE_NOCREATE=$(CURDIR)/bin/node/image-nocreate/oci \
	NSTARGET_KUBERNETES_BIN="$(call kubernetes,$(KUBERNETES_NEWEST))" NSTARGET_ETCD="$$(./hack/etcd.sh)/etcd" \
	NSTARGET_CONTAINERD2_DIR="$$(CONTAINERD_VERSION=$(CONTAINERD_24) ./hack/containerd.sh)" NSTARGET_RUNC2="$(call runc_bin,2.4)"
NODE_TEST = $(GO) test -tags node -count=1 -v -timeout 40m ./e2e/node/
node-e2e: node-tools
	$(node_env) $(NODE_LEG) $@ $(NODE_TEST) -run '$(NODE_E2E_SHORT)'
# NODE_RUN: go test's -run for node-e2e-full (e.g. TestNode/containerd-1.6.20).
NODE_RUN ?= ^TestNode$$
node-e2e-full: node-tools
	$(node_env) $(NODE_LEG) $@ $(NODE_TEST) -run '$(NODE_RUN)'

# The cluster install's image (deploy/, docs/cluster-install.md): the static
# cri-nstarget and cri-nstarget-install of each of IMAGE_ARCHES, built as
# `make release` builds its binaries (the shim's bytes are the release's),
# in an OCI image that hack/image makes with go-containerregistry (its own
# module; no container engine). Into IMAGE_OUT: the binaries (ARCH/), oci/
# (an OCI layout: the index of every architecture), cri-nstarget-image-VERSION.oci.tar
# (the same layout as one tar) and cri-nstarget-image-VERSION-linux-ARCH.tar
# (`docker save`'s format). Every date is the commit's (SOURCE_DATE_EPOCH).
#   make image [VERSION=v1.2.3] [IMAGE_ARCHES="amd64 arm64"] [IMAGE_OUT=bin/image]
#   make image-check   the image built twice, in two directories, compared byte for byte
# IMAGE_SHIM ships another binary as the shim, and IMAGE_VERSION names the
# image apart from its binaries' stamps (the node test's shim that is never
# healthy, beside the same installer as VERSION's: one layer to pull).
IMAGE_ARCHES  ?= amd64
IMAGE_VERSION ?= $(VERSION)
IMAGE_OUT     ?= bin/image
IMAGE_SHIM    ?=
IMAGE_EPOCH    = $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null))
IMAGE_LDFLAGS  = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(BUILD_DATE)
image_go       = env CGO_ENABLED=0 GOOS=linux GOARCH=$(1) GOAMD64=v1 GOARM64=v8.0 GOFLAGS="-trimpath -buildvcs=false" $(GO) build
.PHONY: image image-check
image:
	cd hack/image && $(GO) build -o ../../bin/nstarget-image .
	$(foreach a,$(IMAGE_ARCHES),$(call image_go,$(a)) -tags $(SHIM_TAGS) -ldflags "$(IMAGE_LDFLAGS)" -o $(IMAGE_OUT)/$(a)/cri-nstarget ./cmd/cri-nstarget && \
		$(call image_go,$(a)) -ldflags "$(IMAGE_LDFLAGS)" -o $(IMAGE_OUT)/$(a)/cri-nstarget-install ./cmd/cri-nstarget-install && \
		$(if $(IMAGE_SHIM),install -m 0755 $(IMAGE_SHIM) $(IMAGE_OUT)/$(a)/cri-nstarget &&) ) true
	bin/nstarget-image --out $(IMAGE_OUT) --version $(IMAGE_VERSION) --revision $(COMMIT) --epoch $(IMAGE_EPOCH) \
		--unit systemd/cri-nstarget.service.in $(foreach a,$(IMAGE_ARCHES),--arch $(a)=$(IMAGE_OUT)/$(a))
	@ls -l $(IMAGE_OUT)/*.tar
image-check:
	rm -rf bin/image-check
	$(MAKE) --no-print-directory image IMAGE_OUT=bin/image-check/a
	$(MAKE) --no-print-directory image IMAGE_OUT=bin/image-check/b
	cd bin/image-check && for f in $$(cd a && find oci *.tar -type f | LC_ALL=C sort); do cmp a/$$f b/$$f || exit 1; done
	@echo "image-check: two builds, the same bytes"
