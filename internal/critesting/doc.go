// Package critesting holds the CRI calls that the test suites (integration/,
// e2e/ and e2e/upstream) make alike: a CRI endpoint's two clients, a call's
// context bound to the test, containerd's verbose container info and the
// targeting record in its spec, and the sweep of every pod sandbox at
// teardown. The suites keep their own scenarios; what they share is here,
// once. Tests and tools only; the product never imports it.
package critesting
