// Package baseline keeps the result of a run that does not depend on our
// code (a test suite run against containerd directly, without the shim)
// under a key of everything it does depend on, and gives it back while the
// key is the same. Tests and tools only.
package baseline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Key is what a run depends on: Files by their content (wherever they
// are), Values as written. Sum hashes it.
type Key struct {
	Files  map[string]string // role -> path
	Values map[string]string // name -> value
}

// Sum is the key's SHA-256, hex: each file's by role, then each value by
// name.
func (k Key) Sum() (string, error) {
	h := sha256.New()
	for _, role := range slices.Sorted(maps.Keys(k.Files)) {
		d, err := fileSum(k.Files[role])
		if err != nil {
			return "", fmt.Errorf("the baseline's key: %s: %w", role, err)
		}
		fmt.Fprintf(h, "file %q %s\n", role, d)
	}
	for _, name := range slices.Sorted(maps.Keys(k.Values)) {
		fmt.Fprintf(h, "value %q %q\n", name, k.Values[name])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Cache keeps runs in Dir, one file per Kind and key.
type Cache struct{ Dir, Kind string }

// entry is one kept run: the files it wrote, by name, under its key.
type entry struct {
	Key   string
	Files map[string][]byte
}

// Path is where the run under key is kept.
func (c Cache) Path(key string) string { return filepath.Join(c.Dir, c.Kind+"-"+key+".json") }

// Restore writes the run kept under key to files (name -> where), and says
// whether it did. It did not when nothing is kept, or the entry is
// unreadable, cut short, made under another key or lacks one of the files:
// then the caller runs it again and stores it. The caller still checks the
// files it gets back, as it would a run's.
func (c Cache) Restore(key string, files map[string]string) (bool, error) {
	b, err := os.ReadFile(c.Path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var e entry
	if err := json.Unmarshal(b, &e); err != nil || e.Key != key {
		fmt.Printf("  baseline: %s is unreadable or not for this key; running it again\n", c.Path(key))
		return false, nil
	}
	for name := range files {
		if _, ok := e.Files[name]; !ok {
			fmt.Printf("  baseline: %s has no %s; running it again\n", c.Path(key), name)
			return false, nil
		}
	}
	for name, p := range files {
		if err := os.WriteFile(p, e.Files[name], 0o644); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Store keeps files (name -> path) under key: in a temporary file renamed
// into place, so that a run stopped half-way leaves nothing a later one
// would read.
func (c Cache) Store(key string, files map[string]string) error {
	e := entry{Key: key, Files: map[string][]byte{}}
	for name, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		e.Files[name] = b
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.Dir, "."+c.Kind+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o644); err != nil { // CreateTemp's 0600: the entry is no secret
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), c.Path(key))
}
