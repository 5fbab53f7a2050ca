package kubelet

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// occurrence is one --container-runtime-endpoint in a file: its value's
// bytes [start, end).
type occurrence struct {
	file       File
	value      string
	start, end int
}

// flagOccurrences lists the flags in f that reach the kubelet's command
// line: in an environment file, any assignment; in a unit file, its
// Environment= and ExecStart= lines (continued lines included). Comments
// are skipped.
func flagOccurrences(f File) []occurrence {
	var out []occurrence
	data := f.Data
	relevant, continued := false, false
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off
		}
		line := data[off:end]
		trimmed := bytes.TrimLeft(line, " \t")
		comment := len(trimmed) > 0 && (trimmed[0] == '#' || trimmed[0] == ';')
		if !continued {
			relevant = !comment && len(trimmed) > 0
			if relevant && f.Kind == UnitFile {
				key, _, _ := bytes.Cut(trimmed, []byte("="))
				k := string(bytes.TrimSpace(key))
				relevant = k == "Environment" || k == "ExecStart"
			}
		}
		if relevant && !comment {
			for _, o := range flagsInLine(line) {
				o.file = f
				o.start += off
				o.end += off
				out = append(out, o)
			}
		}
		continued = bytes.HasSuffix(bytes.TrimRight(line, " \t\r"), []byte(`\`))
		off = end + 1
	}
	return out
}

// flagsInLine finds the flag, in either spelling, followed by its value
// (after '=' or blanks), in one physical line.
func flagsInLine(line []byte) []occurrence {
	var out []occurrence
	for _, spelling := range []string{Flag, "--container_runtime_endpoint"} {
		for from := 0; ; {
			i := bytes.Index(line[from:], []byte(spelling))
			if i < 0 {
				break
			}
			i += from
			from = i + len(spelling)
			if i > 0 && !strings.ContainsRune(" \t\"'=", rune(line[i-1])) {
				continue
			}
			j := i + len(spelling)
			switch {
			case j < len(line) && line[j] == '=':
				j++
			case j < len(line) && (line[j] == ' ' || line[j] == '\t'):
				for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
					j++
				}
			default:
				continue // another flag, or no value on this line
			}
			start, end := valueSpan(line, j)
			if end > start {
				out = append(out, occurrence{value: string(line[start:end]), start: start, end: end})
			}
		}
	}
	return out
}

// valueSpan is the value starting at line[j]: up to its closing quote when
// quoted, else up to a blank, a quote or a line continuation.
func valueSpan(line []byte, j int) (int, int) {
	if j < len(line) && (line[j] == '"' || line[j] == '\'') {
		q := line[j]
		k := bytes.IndexByte(line[j+1:], q)
		if k < 0 {
			return j, j
		}
		return j + 1, j + 1 + k
	}
	k := j
	for k < len(line) && !strings.ContainsRune(" \t\"'\\\r", rune(line[k])) {
		k++
	}
	return j, k
}

// cfgValue is containerRuntimeEndpoint in a KubeletConfiguration: its
// value's bytes [start, end) when set, else start is where a line would go.
type cfgValue struct {
	set        bool
	value      string
	start, end int
}

// configValue reads containerRuntimeEndpoint from a KubeletConfiguration
// (YAML or JSON), with the position of its value in the file's bytes.
func configValue(f File) (cfgValue, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(f.Data, &doc); err != nil {
		return cfgValue{}, fmt.Errorf("%s (%s): %w", f.Path, f.Kind, err)
	}
	if len(doc.Content) == 0 {
		if f.Kind == ConfigDropIn {
			return cfgValue{}, nil
		}
		return cfgValue{}, fmt.Errorf("%s (%s) is empty", f.Path, f.Kind)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return cfgValue{}, fmt.Errorf("%s (%s) is not a mapping", f.Path, f.Kind)
	}
	var kind string
	var val *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "kind":
			kind = root.Content[i+1].Value
		case ConfigKey:
			val = root.Content[i+1]
		}
	}
	if kind != "KubeletConfiguration" {
		return cfgValue{}, fmt.Errorf("%s (%s) has kind %q, want KubeletConfiguration", f.Path, f.Kind, kind)
	}
	if val == nil {
		if root.Style&yaml.FlowStyle != 0 {
			return cfgValue{}, fmt.Errorf("%s (%s) is JSON or a flow mapping without %s: add the key to it yourself", f.Path, f.Kind, ConfigKey)
		}
		return cfgValue{start: len(f.Data)}, nil
	}
	if val.Kind != yaml.ScalarNode {
		return cfgValue{}, fmt.Errorf("%s (%s): %s is not a string", f.Path, f.Kind, ConfigKey)
	}
	start, ok := offset(f.Data, val.Line, val.Column)
	if !ok {
		return cfgValue{}, fmt.Errorf("%s (%s): %s at line %d column %d is outside the file", f.Path, f.Kind, ConfigKey, val.Line, val.Column)
	}
	raw := f.Data[start:]
	switch {
	case val.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 && len(raw) > 0 &&
		bytes.HasPrefix(raw[1:], []byte(val.Value+string(raw[0]))):
		start++
	case val.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 &&
		bytes.HasPrefix(raw, []byte(val.Value)):
	default:
		return cfgValue{}, fmt.Errorf("%s (%s): %s at line %d is written in a form this installer does not change (want a plain or quoted string on one line)",
			f.Path, f.Kind, ConfigKey, val.Line)
	}
	return cfgValue{set: true, value: val.Value, start: start, end: start + len(val.Value)}, nil
}

// offset is the byte offset of line and column (1-based, as yaml.v3
// counts: columns in characters).
func offset(data []byte, line, column int) (int, bool) {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	for c := 1; c < column; c++ {
		if off >= len(data) || data[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(data[off:])
		off += size
	}
	return off, off <= len(data)
}
