package intents

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Record is what the shim writes down before it forwards a TARGET
// CreateContainer, and removes only once the answer is ready to go back to
// the client. A record found at start-up therefore names a create whose
// client never received a container id: whatever the backend made for it is
// half-made, or made for nobody, and is removed (the shim's reconciler), so that the
// client's retry of the same request (same name and attempt) finds the name
// free.
type Record struct {
	ID      string `json:"id"` // the record's own name
	Sandbox string `json:"sandbox"`
	Name    string `json:"name"`
	Attempt uint32 `json:"attempt"`
	Target  string `json:"target"`
	// Container is the backend's id for it, once the backend answered.
	Container string `json:"container,omitempty"`
	// Plugin: the create was containerd's own, answered by the plugin
	// mode in its NRI event (Container is then known from the start). Its
	// client may hold the container, which is never removed for it.
	Plugin bool `json:"plugin,omitempty"`
}

// Dir keeps records on disk, one file each: <dir>/<record id>.json, written
// whole (temporary file, then rename).
type Dir struct{ dir string }

// New is the record store under dir (made when the first record is put).
func New(dir string) Dir { return Dir{dir: dir} }

// NewID is a new record's id: 64 random bits.
func NewID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (d Dir) path(id string) string { return filepath.Join(d.dir, id+".json") }

// Put writes (or rewrites) the record.
func (d Dir) Put(rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return fmt.Errorf("intent record: %w", err)
	}
	tmp := d.path(rec.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("intent record: %w", err)
	}
	if err := os.Rename(tmp, d.path(rec.ID)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("intent record: %w", err)
	}
	return nil
}

// Remove deletes the record; a record already gone is fine.
func (d Dir) Remove(id string) error {
	if err := os.Remove(d.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("intent record: %w", err)
	}
	return nil
}

// List reads every record. A file that does not decode (a crash cannot make
// one: records are renamed into place whole) is reported and skipped. A
// temporary file is not a record: it may be a Put in flight, or one a crash
// cut short before anything was forwarded (a few bytes on tmpfs, gone at
// reboot), and it is left alone.
func (d Dir) List() ([]Record, error) {
	entries, err := os.ReadDir(d.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("intent records: %w", err)
	}
	var out []Record
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.dir, name))
		if errors.Is(err, os.ErrNotExist) { // removed since: its create answered
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil || rec.ID+".json" != name {
			errs = append(errs, fmt.Errorf("intent record %s does not decode: %v", name, err))
			continue
		}
		out = append(out, rec)
	}
	return out, errors.Join(errs...)
}
