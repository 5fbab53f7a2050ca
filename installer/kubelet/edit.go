package kubelet

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Edit is the one change of a file that points the kubelet from one
// endpoint to another: the file's bytes before and after. It is kept in
// the installer's state on the host, so that it can be undone.
type Edit struct {
	Path   string `json:"path"`
	Kind   Kind   `json:"kind"`
	Before []byte `json:"before"`
	After  []byte `json:"after"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// Reload says whether systemd must reload its units for the kubelet to see
// the change (a unit file or drop-in changed).
func (e Edit) Reload() bool { return e.Kind == UnitFile }

// Point renders the change of l's place in n to the endpoint to, and checks
// that the file as changed makes to the kubelet's endpoint.
func Point(n Node, l Layout, to string) (Edit, error) {
	if to == "" || strings.ContainsAny(to, " \t\n\"'\\#") {
		return Edit{}, fmt.Errorf("endpoint %q: want a unix:// URL without blanks, quotes or '#'", to)
	}
	i := fileIndex(n, l.Place)
	if i < 0 {
		return Edit{}, fmt.Errorf("%s (%s) was not read", l.Place.Path, l.Place.Kind)
	}
	before := n.Files[i].Data
	var after []byte
	if l.Place.Insert {
		after = append([]byte(nil), before...)
		if len(after) > 0 && after[len(after)-1] != '\n' {
			after = append(after, '\n')
		}
		after = append(after, ConfigKey+": "+to+"\n"...)
	} else {
		after = splice(before, l.Place.Start, l.Place.End, to)
	}

	changed := Node{Argv: n.Argv, Files: append([]File(nil), n.Files...)}
	changed.Files[i].Data = after
	if _, ok := parseArgs(n.Argv).last(Flag); ok {
		changed.Argv = withLastFlag(n.Argv, to)
	}
	got, err := Find(changed)
	if err != nil {
		return Edit{}, fmt.Errorf("%s as changed: %w", l.Place.Path, err)
	}
	if got.Endpoint != to || got.Place.Path != l.Place.Path {
		return Edit{}, fmt.Errorf("%s as changed would give the kubelet %s from %s, not %s", l.Place.Path, got.Endpoint, got.Place.Path, to)
	}
	return Edit{Path: l.Place.Path, Kind: l.Place.Kind, Before: before, After: after, From: l.Endpoint, To: to}, nil
}

// ErrNotPointed: the file no longer sets the endpoint the Edit wrote (it was
// changed since), so there is nothing to revert in it.
var ErrNotPointed = errors.New("the file no longer sets the endpoint the installer wrote")

// Revert is the file's content that points the kubelet back at From: Before
// when the file is as the Edit left it, else current with the endpoint set
// back where it now stands. changed is false when current already is
// Before.
func (e Edit) Revert(current []byte) (content []byte, changed bool, err error) {
	switch {
	case bytes.Equal(current, e.After):
		return e.Before, true, nil
	case bytes.Equal(current, e.Before):
		return current, false, nil
	}
	f := File{Path: e.Path, Kind: e.Kind, Data: current}
	switch e.Kind {
	case EnvFile, UnitFile:
		var found []occurrence
		for _, o := range flagOccurrences(f) {
			if o.value == e.To {
				found = append(found, o)
			}
		}
		if len(found) != 1 {
			return current, false, fmt.Errorf("%s: %d settings of %s=%s: %w", e.Path, len(found), Flag, e.To, ErrNotPointed)
		}
		return splice(current, found[0].start, found[0].end, e.From), true, nil
	default:
		v, err := configValue(f)
		if err != nil {
			return current, false, fmt.Errorf("%w: %w", err, ErrNotPointed)
		}
		if !v.set || v.value != e.To {
			return current, false, fmt.Errorf("%s: %s is %q: %w", e.Path, ConfigKey, v.value, ErrNotPointed)
		}
		return splice(current, v.start, v.end, e.From), true, nil
	}
}

func fileIndex(n Node, p Place) int {
	for i, f := range n.Files {
		if f.Path == p.Path && f.Kind == p.Kind {
			return i
		}
	}
	return -1
}

func splice(b []byte, start, end int, s string) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(s))
	out = append(out, b[:start]...)
	out = append(out, s...)
	return append(out, b[end:]...)
}

// withLastFlag is argv with the value of its last --container-runtime-endpoint
// replaced: the command line the kubelet would have after the change.
func withLastFlag(argv []string, to string) []string {
	out := append([]string(nil), argv...)
	at, joined := -1, false // the last value's index; joined: "--flag=value"
	for i := 1; i < len(out); i++ {
		if out[i] == "--" {
			break
		}
		name, _, hasValue := strings.Cut(out[i], "=")
		if !strings.HasPrefix(name, "--") || normalize(name) != Flag {
			continue
		}
		if hasValue {
			at, joined = i, true
		} else if i+1 < len(out) {
			i++
			at, joined = i, false
		}
	}
	switch {
	case at < 0:
	case joined:
		name, _, _ := strings.Cut(out[at], "=")
		out[at] = name + "=" + to
	default:
		out[at] = to
	}
	return out
}
