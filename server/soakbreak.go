//go:build !soakbreak_intents

package server

// breakIntentRemoval is true only in a shim built with the tag
// soakbreak_intents, a deliberately broken build that keeps every intent
// record a create would remove: make soak SOAK_BREAK=intents shows that the
// soak's leak check fails on it. A constant, so that normal builds hold no
// trace of the break.
const breakIntentRemoval = false
