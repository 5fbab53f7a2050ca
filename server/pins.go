package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// pinDir keeps namespace pins on disk, one directory per container:
// <dir>/<container id>/<kind>. Nothing about pins lives only in memory, so a
// restarted shim sees every pin its predecessor made.
type pinDir struct{ dir string }

// containerDir is the pin directory of container id. Ids come from clients
// (StartContainer, RemoveContainer): one that is not a well-formed container
// id has no directory, so no request can reach a path outside dir.
func (p pinDir) containerDir(id string) (string, bool) {
	if validateID(id) != nil {
		return "", false
	}
	return filepath.Join(p.dir, id), true
}

// Paths are where Hold pins hs for container id.
func (p pinDir) Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error) {
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
func (p pinDir) Hold(id string, hs []*namespaces.Handle) error {
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
func (p pinDir) Add(id string, h *namespaces.Handle) (string, error) {
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
func (p pinDir) Path(id string, kind namespaces.Kind) (string, bool) {
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
func (p pinDir) Release(id string) error {
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
func (p pinDir) IDs() ([]string, error) {
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

// pinCounts counts the namespaces pinned on disk, by kind.
func (t *targeter) pinCounts() (map[string]int, error) {
	ids, err := t.pins.IDs()
	if err != nil {
		return nil, err
	}
	n := map[string]int{string(namespaces.PID): 0, string(namespaces.IPC): 0}
	for _, id := range ids {
		for _, kind := range []namespaces.Kind{namespaces.PID, namespaces.IPC} {
			if _, ok := t.pins.Path(id, kind); ok {
				n[string(kind)]++
			}
		}
	}
	return n, nil
}
