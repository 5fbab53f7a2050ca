package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Registry is a read-only OCI distribution registry over plain HTTP on
// 127.0.0.1, serving a fixed set of in-memory images.
type Registry struct {
	repos    map[string]*repo
	listener net.Listener
	server   *http.Server
	done     chan error

	closeOnce sync.Once
	closeErr  error
}

// repo is one repository: its tags and, by manifest digest, its images.
type repo struct {
	tags   map[string]*Image
	byHash map[digest.Digest]*Image
}

// StartRegistry serves images, keyed by "name:tag" (e.g. "nst/busybox:1"),
// on a free port of 127.0.0.1.
func StartRegistry(images map[string]*Image) (*Registry, error) {
	repos, err := indexImages(images)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for registry: %w", err)
	}
	r := &Registry{repos: repos, listener: l, done: make(chan error, 1)}
	r.server = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { r.done <- r.server.Serve(l) }()
	return r, nil
}

func indexImages(images map[string]*Image) (map[string]*repo, error) {
	repos := map[string]*repo{}
	for nameTag, img := range images {
		name, tag, ok := strings.Cut(nameTag, ":")
		if !ok || name == "" || tag == "" {
			return nil, fmt.Errorf("image key %q: want name:tag, e.g. nst/busybox:1", nameTag)
		}
		rp := repos[name]
		if rp == nil {
			rp = &repo{tags: map[string]*Image{}, byHash: map[digest.Digest]*Image{}}
			repos[name] = rp
		}
		rp.tags[tag] = img
		rp.byHash[img.ManifestDigest] = img
	}
	return repos, nil
}

// Host returns the registry's "127.0.0.1:PORT".
func (r *Registry) Host() string { return r.listener.Addr().String() }

// Ref returns the full reference of nameTag, e.g. "127.0.0.1:PORT/nst/busybox:1".
func (r *Registry) Ref(nameTag string) string { return r.Host() + "/" + nameTag }

// Close stops serving; later calls return the first call's result.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		if err := r.server.Close(); err != nil {
			r.closeErr = fmt.Errorf("close registry: %w", err)
			return
		}
		if err := <-r.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.closeErr = fmt.Errorf("registry serve: %w", err)
		}
	})
	return r.closeErr
}

// ServeHTTP implements the read-only subset of the distribution API.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "read-only registry")
		return
	}
	path := req.URL.Path
	if path == "/v2/" || path == "/v2" {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	if name, ref, ok := splitPath(path, "/manifests/"); ok {
		r.serveManifest(w, req, name, ref)
		return
	}
	if name, ref, ok := splitPath(path, "/blobs/"); ok {
		r.serveBlob(w, req, name, ref)
		return
	}
	writeError(w, http.StatusNotFound, "NAME_UNKNOWN", "unknown path "+path)
}

// splitPath splits "/v2/<name><kind><ref>" into name and ref.
func splitPath(path, kind string) (name, ref string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, kind)
	if i <= 0 || i+len(kind) == len(rest) {
		return "", "", false
	}
	return rest[:i], rest[i+len(kind):], true
}

func (r *Registry) serveManifest(w http.ResponseWriter, req *http.Request, name, ref string) {
	rp := r.repos[name]
	if rp == nil {
		writeError(w, http.StatusNotFound, "NAME_UNKNOWN", "repository "+name+" not known")
		return
	}
	img := rp.tags[ref]
	if img == nil {
		img = rp.byHash[digest.Digest(ref)]
	}
	if img == nil {
		writeError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest "+ref+" not known in "+name)
		return
	}
	writeContent(w, req, ocispec.MediaTypeImageManifest, img.ManifestDigest, img.Manifest)
}

func (r *Registry) serveBlob(w http.ResponseWriter, req *http.Request, name, ref string) {
	rp := r.repos[name]
	if rp == nil {
		writeError(w, http.StatusNotFound, "NAME_UNKNOWN", "repository "+name+" not known")
		return
	}
	d := digest.Digest(ref)
	for _, img := range rp.tags {
		if b, ok := img.Blob(d); ok {
			writeContent(w, req, "application/octet-stream", d, b)
			return
		}
	}
	writeError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob "+ref+" not known in "+name)
}

func writeContent(w http.ResponseWriter, req *http.Request, mediaType string, d digest.Digest, b []byte) {
	h := w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Docker-Content-Digest", d.String())
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Etag", `"`+d.String()+`"`)
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodGet {
		_, _ = bytes.NewReader(b).WriteTo(w)
	}
}

// writeError writes a distribution-style error body.
func writeError(w http.ResponseWriter, status int, code, message string) {
	type detail struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct {
		Errors []detail `json:"errors"`
	}{[]detail{{code, message}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
