//go:build soakbreak_intents

package server

// breakIntentRemoval: see soakbreak.go. This build is broken on purpose.
const breakIntentRemoval = true
