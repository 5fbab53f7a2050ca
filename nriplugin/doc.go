// Package nriplugin is the shim as a plugin of containerd's NRI (2.2 and
// later): the connection, kept up across containerd restarts; the table of
// TARGET creates in flight that expect their CreateContainer event, each
// found by the token its forwarded request carries; and the gate that keeps
// the plugin's registration and forwarded RemovePodSandbox calls apart.
//
// In the plugin mode (Watch) it is told of every container instead: a
// Watcher answers each CreateContainer event, and hears of the
// synchronizations, the starts and the removals; no token is expected.
//
// It knows nothing of targeting. A create registers a Call (Expect) whose
// Adjust answers the event, and hears once its request is answered whether
// the event was answered on a live connection (Settle). That is the whole
// boundary, as containerd's own internal/cri/nri sits behind a few methods
// of the CRI server.
//
// Locks: Plugin.mu guards the connection's state and the table of calls
// (a leaf); registrationGate.mu guards the gate's counts (a leaf). Neither
// is held across a call out. A Call's Adjust runs on the NRI stub's
// goroutine; Settle returns only once it has, so what Adjust writes has one
// owner at a time.
package nriplugin
