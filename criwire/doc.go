// Package criwire reads and rewrites the few CRI messages the shim
// intercepts as protobuf wire bytes, without decoding them into cri-api's Go
// types.
//
// A proxy must not refuse what its backend accepts. Decoding a whole
// CreateContainerRequest with protobuf-go refuses a string field that is not
// UTF-8 (an annotation, a label, a mount path; an env value before cri-api
// v0.34.9), where containerd 1.6 (gogo) takes it as it is and kubelets on
// cri-api ≥ v0.34.9 send env values as bytes; re-encoding a decoded message
// also reorders and re-packs what the shim never meant to touch. So the shim
// reads only the fields targeting needs, and a rewrite changes only the
// namespace modes, target_id and the annotation it adds: every other byte
// reaches the backend as it came, unknown fields included.
//
// Reading follows protobuf's own rules, as the backend's decoder does: the
// last occurrence of a scalar field wins, occurrences of a message field are
// merged, and a field whose wire type does not match its declaration is an
// unknown field. A message that is not well-formed protobuf is an error; the
// shim then forwards it untouched and lets the backend answer it.
//
// A CreateContainerRequest is read and, when the shim acts on it, rewritten
// in one step (ReadForwarded): its forms with and without the annotation
// the shim adds, so that a create that goes again without NRI needs no
// second rewrite.
//
// The field numbers are cri-api's (runtime/v1/api.proto); a test checks them
// against the descriptors of the cri-api this module builds with.
package criwire
