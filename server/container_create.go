package server

import (
	"context"

	"github.com/cri-nstarget/cri-nstarget/criwire"
)

// createContainer handles CreateContainer, read off the wire (criwire):
// requests with neither TARGET nor an unknown NamespaceMode, and bytes that
// are not protobuf, go to the backend byte for byte; the others are
// targeted (createTargeted).
func (t *targeter) createContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	req, err := criwire.ReadCreate(raw)
	if err != nil {
		// not protobuf: the backend answers it as it would directly
		return fwd(ctx, raw)
	}
	p, err := planFor(req)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return fwd(ctx, raw)
	}
	return t.createTargeted(ctx, createRequest{Create: req, raw: raw}, p, fwd)
}

// createRequest is a CreateContainer request that asks for targeting: as
// read, and its bytes.
type createRequest struct {
	criwire.Create
	raw []byte
}
