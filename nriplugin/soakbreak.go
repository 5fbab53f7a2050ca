//go:build !soakbreak_nrigate

package nriplugin

// breakRegistrationGate is true only in a shim built with the tag
// soakbreak_nrigate, a deliberately broken build whose NRI registrations do
// not wait for the RemovePodSandbox calls in the backend (registrationGate):
// make soak SOAK_BREAK=nrigate. A constant, so that normal builds hold no
// trace of the break.
const breakRegistrationGate = false
