package pins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// Dir is the pins under one directory.
type Dir struct{ dir string }

// New is the pin store under dir (made when the first pin is).
func New(dir string) Dir { return Dir{dir: dir} }

// containerDir is the pin directory of container id. Ids come from clients
// (StartContainer, RemoveContainer): one that is not a well-formed container
// id has no directory, so no request can reach a path outside dir.
func (p Dir) containerDir(id string) (string, bool) {
	if ValidateID(id) != nil {
		return "", false
	}
	return filepath.Join(p.dir, id), true
}

// Paths are where Hold pins hs for container id.
func (p Dir) Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error) {
	d, ok := p.containerDir(id)
	if !ok {
		return nil, fmt.Errorf("pin namespaces of %q: not a container id", id)
	}
	paths := make(map[namespaces.Kind]string, len(hs))
	for _, h := range hs {
		paths[h.Kind] = filepath.Join(d, string(h.Kind))
	}
	return paths, nil
}

// Hold pins each handle for container id, at its path in Paths. On error,
// nothing stays pinned for id.
func (p Dir) Hold(id string, hs []*namespaces.Handle) error {
	paths, err := p.Paths(id, hs)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := namespaces.Pin(h, paths[h.Kind]); err != nil {
			return errors.Join(err, p.Release(id))
		}
	}
	return nil
}

// Add pins one more handle for container id, at its path in Paths, and
// returns that path. On error nothing of h stays pinned; the other pins of
// id are left alone.
func (p Dir) Add(id string, h *namespaces.Handle) (string, error) {
	paths, err := p.Paths(id, []*namespaces.Handle{h})
	if err != nil {
		return "", err
	}
	if err := namespaces.Pin(h, paths[h.Kind]); err != nil {
		return "", err
	}
	return paths[h.Kind], nil
}

// Path returns the pin of kind for container id, if there is one.
func (p Dir) Path(id string, kind namespaces.Kind) (string, bool) {
	d, ok := p.containerDir(id)
	if !ok {
		return "", false
	}
	path := filepath.Join(d, string(kind))
	if _, err := os.Lstat(path); err != nil {
		return "", false
	}
	return path, true
}

// Release unpins everything held for container id.
func (p Dir) Release(id string) error {
	d, ok := p.containerDir(id)
	if !ok {
		return nil
	}
	entries, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release pins of %q: %w", id, err)
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, namespaces.Unpin(filepath.Join(d, e.Name())))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release pins of %q: %w", id, err)
	}
	if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release pins of %q: %w", id, err)
	}
	return nil
}

// IDs lists the containers that hold pins.
func (p Dir) IDs() ([]string, error) {
	entries, err := os.ReadDir(p.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pins: %w", err)
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// MaxIDLen bounds an id. containerd ids are 64 hex digits; any CRI
// runtime's ids fit well within this.
const MaxIDLen = 128

// ValidateID accepts a container id, or a unique prefix of one: ASCII
// letters and digits, with '.', '_' and '-' between them. Paths, "..", NUL,
// non-ASCII bytes and absurd lengths are refused, so no id names a path
// outside the pin directory.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("the id is empty")
	case len(id) > MaxIDLen:
		return fmt.Errorf("%q is %d bytes long; at most %d allowed", clip(id), len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if isAlnum(c) || (c == '.' || c == '_' || c == '-') && i > 0 && i < len(id)-1 && isAlnum(id[i-1]) {
			continue
		}
		return fmt.Errorf("%q has %q at byte %d; a container id is ASCII letters and digits, with single '.', '_' or '-' between them", clip(id), c, i)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}
