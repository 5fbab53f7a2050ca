//go:build kubetest

// Package kubetest holds cri-nstarget's own specs on Kubernetes' e2e
// framework (k8s.io/kubernetes/test/e2e/framework): the tests upstream
// lacks, run the way upstream's own specs are (issue 26). This module
// cannot require k8s.io/kubernetes, whose go.mod replaces its staging
// modules with paths in its tree, so hack/kubernetes.sh --project-e2e
// compiles this package in the scratch module that builds e2e.test, at
// the same Kubernetes version, into nstarget-e2e.test; make e2e-upstream
// runs it beside e2e.test, directly against containerd and through the
// shim. The build tag keeps the main module's tools off it.
package kubetest

import (
	"flag"
	"os"
	"testing"

	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"

	// As e2e.test: the components' logs on a failure, and all nodes
	// Ready after each spec.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

// TestMain reads e2e.test's flags (--provider, --kubeconfig, the ginkgo
// ones), as k8s.io/kubernetes/test/e2e's own TestMain does.
func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// TestE2E runs the specs with e2e.test's suite setup and reporting.
func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
