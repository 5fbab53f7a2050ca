package main

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
	"strings"
)

// directKey is everything critest's direct run against containerd depends
// on: that run is a baseline of containerd, runc and critest, not of our
// code, so its result is kept under the key's sum and reused while none of
// these change.
type directKey struct {
	Binaries map[string]string // what runs, by role: critest, containerd, its runc shim, runc, the CNI plugins
	Config   string            // containerd's config.toml, its directory and the registry's address made placeholders
	CNI      string            // the pods' CNI network, likewise
	Skips    []skipEntry       // the skip list
	Args     []string          // critest's arguments, the paths made placeholders
	Images   map[string]string // each image critest pulls, built here: its manifest digest
	Kernel   string            // the host's kernel release
}

// sum hashes the key: each binary by its content, the rest as written.
func (k directKey) sum() (string, error) {
	h := sha256.New()
	for _, role := range slices.Sorted(maps.Keys(k.Binaries)) {
		d, err := fileSum(k.Binaries[role])
		if err != nil {
			return "", fmt.Errorf("the direct run's key: %s: %w", role, err)
		}
		fmt.Fprintf(h, "binary %s %s\n", role, d)
	}
	for _, name := range slices.Sorted(maps.Keys(k.Images)) {
		fmt.Fprintf(h, "image %q %s\n", name, k.Images[name])
	}
	for _, s := range k.Skips {
		fmt.Fprintf(h, "skip %q %q\n", s.pattern, s.reason)
	}
	fmt.Fprintf(h, "args %q\nconfig %q\ncni %q\nkernel %q\n", k.Args, k.Config, k.CNI, k.Kernel)
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

// baseline is one kept direct run: critest's reports and log as it wrote
// them, under the key they were made with.
type baseline struct {
	Key    string
	JUnit  []byte
	Ginkgo []byte // the JSON report
	Log    []byte
}

// baselineCache keeps direct runs in Dir, one file per key.
type baselineCache struct{ Dir string }

func (c baselineCache) path(key string) string {
	return filepath.Join(c.Dir, "critest-direct-"+key+".json")
}

// restore writes the kept run for key to junit, its JSON report and log,
// and reads it back as critest's result. ok is false when there is none,
// or it is unreadable, partial or made under another key: then the caller
// runs critest and stores what it wrote.
func (c baselineCache) restore(key, junit, log string) (r junitResult, ok bool, err error) {
	b, err := os.ReadFile(c.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	} else if err != nil {
		return r, false, err
	}
	var kept baseline
	if err := json.Unmarshal(b, &kept); err != nil || kept.Key != key {
		fmt.Printf("  direct run: the kept run %s is unreadable or not for this key; running it again\n", c.path(key))
		return r, false, nil
	}
	for p, data := range map[string][]byte{junit: kept.JUnit, jsonReport(junit): kept.Ginkgo, log: kept.Log} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return r, false, err
		}
	}
	if r, err = critestResult(nil, junit, log); err != nil || len(r.Failed) > 0 {
		fmt.Printf("  direct run: the kept run %s is not a clean run (%v); running it again\n", c.path(key), err)
		return junitResult{}, false, nil
	}
	return r, true, nil
}

// store keeps the run critest just wrote to junit, its JSON report and
// log: in a temporary file renamed into place, so that a run stopped
// half-way leaves nothing a later one would read.
func (c baselineCache) store(key, junit, log string) error {
	kept := baseline{Key: key}
	for p, dst := range map[string]*[]byte{junit: &kept.JUnit, jsonReport(junit): &kept.Ginkgo, log: &kept.Log} {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		*dst = b
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.Dir, ".critest-direct-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), c.path(key))
}

// placeholders replaces each old string (a run's directory, the registry's
// address) by its placeholder.
func placeholders(s string, oldNew ...string) string {
	return strings.NewReplacer(oldNew...).Replace(s)
}
