#!/usr/bin/env bash
# Builds kube-apiserver, kubelet and kubectl of one Kubernetes release from
# the Go module proxy into a cache dir and prints the directory holding them
# (issue 15: a real kubelet in front of the shim). Idempotent: when the cached
# kubectl reports the wanted version it only prints the directory. One
# release per call (~5 min on 2 cores); make e2e-tools calls it for each.
# With --upstream-e2e it builds, into the same directory, what running
# Kubernetes' own e2e specs against that cluster needs (issue 26): e2e.test
# (`go test -c k8s.io/kubernetes/test/e2e`), kube-controller-manager,
# kube-scheduler, agnhost (test/images/agnhost, the Go program most
# upstream specs run in their pods) and ginkgo, the CLI that runs e2e.test's
# specs in parallel, at the version k8s.io/kubernetes requires; ~10 more
# minutes the first time.
#
#   KUBERNETES_VERSION=v1.37.2 hack/kubernetes.sh   # -> /var/cache/cri-nstarget/kubernetes-v1.37.2/bin
#   KUBERNETES_VERSION=v1.35.4 KUBERNETES_CACHE=/some/dir hack/kubernetes.sh
#   KUBERNETES_VERSION=v1.37.2 hack/kubernetes.sh --upstream-e2e
#   KUBERNETES_VERSION=v1.37.2 hack/kubernetes.sh --project-e2e bin/nstarget-e2e.test
#   KUBERNETES_VERSION=v1.35.4 hack/kubernetes.sh --kubelet
# --kubelet builds the kubelet alone (into the same directory): an older
# release's kubelet runs under the newest release's control plane, as on a
# node being upgraded (kube-apiserver supports kubelets three minors older),
# so the older releases need nothing else; about half the cold build.
# --project-e2e compiles the project's own specs on Kubernetes' e2e framework
# (e2e/kubetest, build tag kubetest) in the same scratch module, into the file
# named; every call builds it (Go's build cache makes a repeat quick), since
# it is this tree's code, not the release's.
# The versions are named once, in the Makefile (KUBERNETES_NEWEST and
# KUBERNETES_OLDEST: the newest release and the oldest still supported).
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces the k8s.io
# staging modules with paths inside its tree. A scratch module requires it and
# maps each of those staging modules to the release's v0.MINOR.PATCH.
set -euo pipefail
version=${KUBERNETES_VERSION:?set KUBERNETES_VERSION (the Makefile names them: make e2e-tools)}
cache=${KUBERNETES_CACHE:-/var/cache/cri-nstarget}
out="$cache/kubernetes-$version/bin"
staging="v0.${version#v1.}"
upstream_e2e=false project_e2e= kubelet_only=false
case "${1:-}" in
--upstream-e2e) upstream_e2e=true ;;
--kubelet) kubelet_only=true ;;
--project-e2e) project_e2e=$(realpath -m "${2:?--project-e2e FILE}") ;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)

# The version check reads kubectl's whole output before grep sees it: piped
# into `grep -q` under pipefail, kubectl (two writes) dies of SIGPIPE when grep
# exits after the first line, the check fails about one time in five, and the
# rebuild that follows used to replace the directory (issue 26).
base_built() {
  [ -x "$out/kubectl" ] && [ -x "$out/kubelet" ] && [ -x "$out/kube-apiserver" ] || return 1
  local v
  v=$("$out/kubectl" version --client 2>/dev/null) && grep -q "^Client Version: $version$" <<<"$v"
}
# What --upstream-e2e adds beside e2e.test: each package's binary is named
# after its last path element.
extras=(k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
  k8s.io/kubernetes/test/images/agnhost github.com/onsi/ginkgo/v2/ginkgo)
extras_built() {
  [ -x "$out/e2e.test" ] || return 1
  for p in "${extras[@]}"; do [ -x "$out/${p##*/}" ] || return 1; done
}
kubelet_built() {
  [ -x "$out/kubelet" ] || return 1
  local v
  v=$("$out/kubelet" --version 2>/dev/null) && grep -q "^Kubernetes $version$" <<<"$v"
}
built() {
  if $kubelet_only; then kubelet_built; return; fi
  base_built || return 1
  if $upstream_e2e; then extras_built || return 1; fi
}
if [ -z "$project_e2e" ] && built; then
  echo "$out"
  exit 0
fi
# One build per release at a time: a second call waits, then finds it built.
mkdir -p "$cache"
exec 9>"$cache/kubernetes-$version.lock"
flock 9
if [ -z "$project_e2e" ] && built; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { echo "kubernetes: go not found" >&2; exit 1; }

export GOFLAGS=-mod=mod GONOSUMDB=k8s.io,sigs.k8s.io CGO_ENABLED=0
work=$(mktemp -d /tmp/kubernetes-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
go mod init scratch >/dev/null 2>&1
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$gomod" ] || { echo "kubernetes: k8s.io/kubernetes@$version not downloaded" >&2; exit 1; }
go mod edit -require "k8s.io/kubernetes@$version"
# every `k8s.io/X => ./staging/src/k8s.io/X` of kubernetes' go.mod
for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9.-]*\) => ./staging/.*|\1|p' "$gomod"); do
  go mod edit -replace "$m=$m@$staging"
done
ldflags="-s -w"
for v in gitVersion="$version" gitMajor=1 gitMinor="$(echo "${version#v1.}" | cut -d. -f1)" gitTreeState=clean; do
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags="$ldflags -X $pkg.$v"
  done
done
if [ -n "$project_e2e" ]; then
  mkdir kubetest
  cp "$repo"/e2e/kubetest/*.go kubetest/
  go vet -trimpath -tags kubetest ./kubetest  # -trimpath: the build cache of the build below
  # -vet=off: go vet above has vetted it (go test -c would vet again, with fewer checks)
  go test -c -vet=off -tags kubetest -trimpath -ldflags "$ldflags" -o "$project_e2e" ./kubetest
  echo "$project_e2e"
  exit 0
fi
# Only what is missing is built, into $out.tmp, then moved into $out file by
# file: a plain call never removes what --upstream-e2e built, nor the reverse.
rm -rf "$out.tmp"
mkdir -p "$out.tmp" "$out"
if $kubelet_only; then
  echo "kubernetes: building kubelet $version into $out" >&2
  go build -trimpath -ldflags "$ldflags" -o "$out.tmp/" k8s.io/kubernetes/cmd/kubelet
elif ! base_built; then
  echo "kubernetes: building kube-apiserver, kubelet, kubectl $version into $out (a few minutes the first time)" >&2
  go build -trimpath -ldflags "$ldflags" -o "$out.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl
fi
if $upstream_e2e && ! extras_built; then
  echo "kubernetes: building what is missing of e2e.test, kube-controller-manager, kube-scheduler, agnhost, ginkgo $version" >&2
  pkgs=()
  for p in "${extras[@]}"; do
    [ -x "$out/${p##*/}" ] || pkgs+=("$p")
  done
  if [ ${#pkgs[@]} -gt 0 ]; then
    go build -trimpath -ldflags "$ldflags" -o "$out.tmp/" "${pkgs[@]}"
  fi
  # -vet=off: go test -c vets the package first, Kubernetes' own code (minutes, cold)
  [ -x "$out/e2e.test" ] || go test -c -vet=off -trimpath -ldflags "$ldflags" -o "$out.tmp/e2e.test" k8s.io/kubernetes/test/e2e
fi
for f in "$out.tmp"/*; do
  mv -f "$f" "$out/"
done
rmdir "$out.tmp"
if $kubelet_only; then "$out/kubelet" --version >&2; else "$out/kubectl" version --client >&2; fi
echo "$out"
