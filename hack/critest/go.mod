module github.com/cri-nstarget/cri-nstarget/hack/critest

go 1.26.8

tool sigs.k8s.io/cri-tools/cmd/critest

require sigs.k8s.io/cri-tools v1.37.0 // indirect
