// Package intents keeps the records of TARGET creates in flight on disk,
// so that a create cut short by a crash is found at the next start and what
// it left is removed (the reconciler in package server). A record is written
// whole before the create is forwarded, written again with the container's
// id once the backend answers with one, and removed when the create ends;
// when what the backend holds for it is unknown (no answer) or could not be
// removed (containerd down), it is left for the reconciler, which removes it
// once what it names is gone. A start that fails, and whose container cannot
// be removed, writes a record naming that container alone. The store holds
// no lock and no memory: one file per record, renamed into place. A record
// is written only by the create (or start) it is for, while that call is in
// flight; after that, only the reconciler touches it, to remove it.
package intents
