package oci

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Opt changes a spec. Options touch only Annotations, Linux.Namespaces and
// Mounts.
type Opt func(*specs.Spec) error

// Apply runs opts on s in order and stops at the first error.
func Apply(s *specs.Spec, opts ...Opt) error {
	for _, o := range opts {
		if err := o(s); err != nil {
			return err
		}
	}
	return nil
}

// WithNamespacePath makes the container join the namespace of type typ at
// path: an existing entry of that type is replaced, otherwise one is appended.
func WithNamespacePath(typ specs.LinuxNamespaceType, path string) Opt {
	return func(s *specs.Spec) error {
		switch {
		case !filepath.IsAbs(path):
			return fmt.Errorf("set %s namespace: path %q is not absolute", typ, path)
		case !utf8.ValidString(path):
			// JSON would carry another path than the one meant
			return fmt.Errorf("set %s namespace: path %q is not valid UTF-8", typ, path)
		}
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		for i := range s.Linux.Namespaces {
			if s.Linux.Namespaces[i].Type == typ {
				s.Linux.Namespaces[i].Path = path
				return nil
			}
		}
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: typ, Path: path})
		return nil
	}
}

// WithMount makes m the container's mount at m.Destination: the last entry
// with that destination is replaced (the one that wins, as mounts are made in
// order), otherwise m is appended.
func WithMount(m specs.Mount) Opt {
	return func(s *specs.Spec) error {
		switch {
		case !filepath.IsAbs(m.Destination):
			return fmt.Errorf("mount %q at %q: the destination is not an absolute path", m.Source, m.Destination)
		case m.Type == "bind" && !filepath.IsAbs(m.Source):
			return fmt.Errorf("mount %q at %q: a bind mount's source must be an absolute path", m.Source, m.Destination)
		case !utf8.ValidString(m.Destination) || !utf8.ValidString(m.Source):
			return fmt.Errorf("mount %q at %q: not valid UTF-8", m.Source, m.Destination)
		}
		if i := MountIndex(s, m.Destination); i >= 0 {
			s.Mounts[i] = m
			return nil
		}
		s.Mounts = append(s.Mounts, m)
		return nil
	}
}

// MountIndex is the index of the last mount of s at destination (the one the
// container sees), or -1.
func MountIndex(s *specs.Spec, destination string) int {
	if s == nil {
		return -1
	}
	for i := len(s.Mounts) - 1; i >= 0; i-- {
		if filepath.Clean(s.Mounts[i].Destination) == filepath.Clean(destination) {
			return i
		}
	}
	return -1
}

// WithAnnotation sets one annotation.
func WithAnnotation(key, value string) Opt {
	return func(s *specs.Spec) error {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[key] = value
		return nil
	}
}

// NamespacePath returns the path of the namespace entry of type typ, and
// whether the spec has such an entry at all (an entry with an empty path
// means a new namespace).
func NamespacePath(s *specs.Spec, typ specs.LinuxNamespaceType) (string, bool) {
	if s == nil || s.Linux == nil {
		return "", false
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == typ {
			return ns.Path, true
		}
	}
	return "", false
}

// Patch decodes the "annotations", "mounts" and "linux.namespaces" of the
// spec JSON raw, lets edit inspect them (the rest of the *specs.Spec it gets
// is not decoded) and return options, applies them, and returns raw with
// only what the options changed replaced: the annotations and namespaces
// whole, and of the mounts only the entries that changed (their destination,
// type, source and options; any other field of such an entry is kept) and
// those appended. Every other byte of meaning in raw, including fields
// unknown to this package, is kept.
func Patch(raw []byte, edit func(*specs.Spec) ([]Opt, error)) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if top == nil {
		return nil, fmt.Errorf("decode spec: not a JSON object")
	}
	s, rawMounts, linux, err := decodeEditable(top)
	if err != nil {
		return nil, err
	}
	mounts := slices.Clone(s.Mounts)
	opts, err := edit(s)
	if err != nil {
		return nil, err
	}
	if err := Apply(s, opts...); err != nil {
		return nil, err
	}
	if err := setField(top, "annotations", s.Annotations, len(s.Annotations) > 0); err != nil {
		return nil, err
	}
	if err := patchMounts(top, rawMounts, mounts, s.Mounts); err != nil {
		return nil, err
	}
	if s.Linux != nil {
		if linux == nil {
			linux = map[string]json.RawMessage{}
		}
		if err := setField(linux, "namespaces", s.Linux.Namespaces, len(s.Linux.Namespaces) > 0); err != nil {
			return nil, err
		}
		if err := setField(top, "linux", linux, true); err != nil {
			return nil, err
		}
	}
	return json.Marshal(top)
}

// decodeEditable decodes what options may edit of the spec whose top-level
// fields are top: annotations, mounts (also as stored, rawMounts) and the
// Linux namespaces; linux is the stored "linux" object, nil when absent.
// A key that only case-folds to one of those fields is refused (exactKeys).
func decodeEditable(top map[string]json.RawMessage) (s *specs.Spec, rawMounts []json.RawMessage, linux map[string]json.RawMessage, err error) {
	if err := exactKeys(top, "spec", "annotations", "mounts", "linux"); err != nil {
		return nil, nil, nil, err
	}
	s = &specs.Spec{}
	if b, ok := top["annotations"]; ok {
		if err := json.Unmarshal(b, &s.Annotations); err != nil {
			return nil, nil, nil, fmt.Errorf("decode spec annotations: %w", err)
		}
	}
	if b, ok := top["mounts"]; ok {
		if err := json.Unmarshal(b, &rawMounts); err != nil {
			return nil, nil, nil, fmt.Errorf("decode spec mounts: %w", err)
		}
		if err := json.Unmarshal(b, &s.Mounts); err != nil {
			return nil, nil, nil, fmt.Errorf("decode spec mounts: %w", err)
		}
	}
	if b, ok := top["linux"]; ok {
		if err := json.Unmarshal(b, &linux); err != nil {
			return nil, nil, nil, fmt.Errorf("decode spec linux: %w", err)
		}
	}
	if linux != nil { // present and not null
		if err := exactKeys(linux, "spec linux", "namespaces"); err != nil {
			return nil, nil, nil, err
		}
		s.Linux = &specs.Linux{}
		if b, ok := linux["namespaces"]; ok {
			if err := json.Unmarshal(b, &s.Linux.Namespaces); err != nil {
				return nil, nil, nil, fmt.Errorf("decode spec linux namespaces: %w", err)
			}
		}
	}
	return s, rawMounts, linux, nil
}

// patchMounts writes into top["mounts"] the entries of after that differ
// from before (raw holds before as stored), keeping each changed entry's
// other fields. Options only replace or append mounts, never remove one.
func patchMounts(top map[string]json.RawMessage, raw []json.RawMessage, before, after []specs.Mount) error {
	if len(after) < len(before) {
		return fmt.Errorf("encode spec mounts: %d of %d removed", len(before)-len(after), len(before))
	}
	changed := len(after) != len(before)
	for i := range before {
		if reflect.DeepEqual(before[i], after[i]) {
			continue
		}
		changed = true
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(raw[i], &entry); err != nil || entry == nil {
			return fmt.Errorf("decode spec mount %d: not a JSON object", i)
		}
		if err := exactKeys(entry, fmt.Sprintf("spec mount %d", i), "destination", "type", "source", "options"); err != nil {
			return err
		}
		m := after[i]
		for k, v := range map[string]any{"destination": m.Destination, "type": m.Type, "source": m.Source, "options": m.Options} {
			if err := setField(entry, k, v, k == "destination" || !reflect.ValueOf(v).IsZero()); err != nil {
				return err
			}
		}
		b, err := json.Marshal(entry)
		if err != nil {
			return fmt.Errorf("encode spec mount %d: %w", i, err)
		}
		raw[i] = b
	}
	if !changed {
		return nil
	}
	for _, m := range after[len(before):] {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode spec mount: %w", err)
		}
		raw = append(raw, b)
	}
	return setField(top, "mounts", raw, true)
}

// exactKeys refuses m when a key only case-folds to one of names, the fields
// Patch rewrites in m, as "Linux" and "annotationſ" do: Go decoders, runc's
// among them, read such a key as that field, which Patch (looking keys up
// exactly) would neither see nor replace.
func exactKeys(m map[string]json.RawMessage, what string, names ...string) error {
	for k := range m {
		for _, n := range names {
			if k != n && strings.EqualFold(k, n) {
				return fmt.Errorf("decode %s: key %q stands for %q; not patched", what, k, n)
			}
		}
	}
	return nil
}

func setField(m map[string]json.RawMessage, key string, v any, present bool) error {
	if !present {
		delete(m, key)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode spec %s: %w", key, err)
	}
	m[key] = b
	return nil
}
