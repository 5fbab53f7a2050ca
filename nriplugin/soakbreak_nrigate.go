//go:build soakbreak_nrigate

package nriplugin

// breakRegistrationGate: see soakbreak.go. This build is broken on purpose.
const breakRegistrationGate = true
