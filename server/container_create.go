package server

import (
	"context"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// createContainer handles CreateContainer, read off the wire (criwire) in
// one step with the forms it would be forwarded in: requests with neither
// TARGET nor an unknown NamespaceMode, and bytes that are not protobuf, go
// to the backend byte for byte; the others are targeted (createTargeted).
// The token their NRI event is to carry is in the Annotated form, drawn
// before the request is read (newToken).
func (t *targeter) createContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	token := t.newToken()
	req, forms, err := criwire.ReadForwarded(raw, tokenAnnotation(token)...)
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
	return t.createTargeted(ctx, createRequest{Create: req, forms: forms}, token, p, fwd)
}

// createRequest is a CreateContainer request that asks for targeting: as
// read, and its forms as the backend is to get it.
type createRequest struct {
	criwire.Create
	forms *criwire.Forwarded
}

// newToken is the token a create's request is to carry to its NRI event:
// none without NRI.
func (t *targeter) newToken() string {
	if t.nri == nil {
		return ""
	}
	return nriplugin.NewToken()
}

// tokenAnnotation is the NRI token's annotation, none for no token.
func tokenAnnotation(token string) []criwire.Annotation {
	if token == "" {
		return nil
	}
	return []criwire.Annotation{{Key: nriplugin.AnnotationRequest, Value: token}}
}
