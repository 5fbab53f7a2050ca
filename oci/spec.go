package oci

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"unicode/utf8"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Opt changes a spec. Options touch only Annotations and Linux.Namespaces.
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

// Patch decodes the "annotations" and "linux.namespaces" of the spec JSON
// raw, lets edit inspect them (the rest of the *specs.Spec it gets is not
// decoded) and return options, applies them, and returns raw with only those
// two replaced. Every other byte of meaning in raw, including fields unknown
// to this package, is kept.
func Patch(raw []byte, edit func(*specs.Spec) ([]Opt, error)) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if top == nil {
		return nil, fmt.Errorf("decode spec: not a JSON object")
	}
	var s specs.Spec
	if b, ok := top["annotations"]; ok {
		if err := json.Unmarshal(b, &s.Annotations); err != nil {
			return nil, fmt.Errorf("decode spec annotations: %w", err)
		}
	}
	var linux map[string]json.RawMessage
	if b, ok := top["linux"]; ok {
		if err := json.Unmarshal(b, &linux); err != nil {
			return nil, fmt.Errorf("decode spec linux: %w", err)
		}
	}
	if linux != nil { // present and not null
		s.Linux = &specs.Linux{}
		if b, ok := linux["namespaces"]; ok {
			if err := json.Unmarshal(b, &s.Linux.Namespaces); err != nil {
				return nil, fmt.Errorf("decode spec linux namespaces: %w", err)
			}
		}
	}
	opts, err := edit(&s)
	if err != nil {
		return nil, err
	}
	if err := Apply(&s, opts...); err != nil {
		return nil, err
	}
	if err := setField(top, "annotations", s.Annotations, len(s.Annotations) > 0); err != nil {
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
