// Package support is the support window, named once: the containerd release
// lines the shim supports, with their status and end dates as containerd's
// own RELEASES.md gives them, and the Kubernetes minors. `cri-nstarget
// check` judges a node's containerd against it; RELEASES.md's tables and
// the Makefile's BACKENDS (the versions CI tests) are held to it by tests
// (docs/releases_test.go). The exact versions CI builds (v2.4.2 and the
// like) are the Makefile's: this package knows release lines, not patches.
package support
