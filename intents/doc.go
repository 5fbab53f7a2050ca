// Package intents keeps the records of TARGET creates in flight on disk,
// so that a create cut short by a crash is found at the next start and what
// it left is removed (the reconciler in package server). A record is written
// whole before the create is forwarded and removed once its answer is ready.
// The store holds no lock and no memory: one file per record, renamed into
// place, and a record is only ever written by the create it names (or,
// after that create is over, by the reconciler).
package intents
