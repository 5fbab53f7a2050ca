package support

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Status is how the shim supports a containerd release line.
type Status int

const (
	// Unsupported: a line not listed, or listed as past its end.
	Unsupported Status = iota
	// BestEffort: past containerd's own end of life; kept working where it
	// costs little, not promised.
	BestEffort
	// Supported: within containerd's own support (active or LTS).
	Supported
)

func (s Status) String() string {
	switch s {
	case BestEffort:
		return "best effort"
	case Supported:
		return "supported"
	}
	return "unsupported"
}

// Line is one containerd release line (a minor).
type Line struct {
	Minor  string // "2.4"
	Status Status
	// Upstream is containerd's own status and end, from its RELEASES.md
	// (the v2.4.2 module's).
	Upstream string
	// Path is how the shim points a debug container at its target there.
	Path string
}

// Containerd is the support window, newest first.
var Containerd = []Line{
	{Minor: "2.4", Status: Supported, Upstream: "active until May 2027", Path: "NRI"},
	{Minor: "2.3", Status: Supported, Upstream: "LTS until 2028", Path: "NRI"},
	{Minor: "2.0", Status: Supported, Upstream: "LTS until March 2027", Path: "the Update path (its NRI cannot adjust namespaces)"},
	{Minor: "1.7", Status: BestEffort, Upstream: "ended September 2026", Path: "the Update path"},
}

// Kubernetes is the Kubernetes minors supported, newest first: the newest
// release and the two before it. When a new minor comes out (1.38 is due
// on 2026-12-16) it is added here, and the oldest leaves, in the release
// that follows it.
var Kubernetes = []string{"1.37", "1.36", "1.35"}

// LineOf is the release line of a containerd version ("v2.4.2", "2.4.2",
// "1.7.35-1"); ok is false when it is not in the window.
func LineOf(version string) (Line, bool) {
	m, err := Minor(version)
	if err != nil {
		return Line{}, false
	}
	for _, l := range Containerd {
		if l.Minor == m {
			return l, true
		}
	}
	return Line{}, false
}

// Minor is the "X.Y" of a version "vX.Y.Z..." or "X.Y.Z...".
func Minor(version string) (string, error) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("version %q: want X.Y or X.Y.Z", version)
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	for _, p := range []string{parts[0], minor} {
		if _, err := strconv.Atoi(p); err != nil || p == "" {
			return "", fmt.Errorf("version %q: want X.Y or X.Y.Z", version)
		}
	}
	return parts[0] + "." + minor, nil
}

// Window says the window in words: "2.4, 2.3, 2.0 (1.7 best effort)".
func Window() string {
	var in, best []string
	for _, l := range Containerd {
		switch l.Status {
		case Supported:
			in = append(in, l.Minor)
		case BestEffort:
			best = append(best, l.Minor)
		}
	}
	s := strings.Join(in, ", ")
	if len(best) > 0 {
		s += " (" + strings.Join(best, ", ") + " best effort)"
	}
	return s
}

// Place is where a Kubernetes minor stands against the window.
type Place int

const (
	// Inside: one of Kubernetes' minors.
	Inside Place = iota
	// Newer: newer than the newest, not yet added (RELEASES.md says when).
	Newer
	// Older: older than the oldest, left the window.
	Older
)

// KubernetesPlace is the minor of a Kubernetes version ("v1.37.2",
// "v1.36.1+k3s1") and where it stands against Kubernetes.
func KubernetesPlace(version string) (string, Place, error) {
	m, err := Minor(version)
	if err != nil {
		return "", Older, err
	}
	switch {
	case compareMinors(m, Kubernetes[0]) > 0:
		return m, Newer, nil
	case compareMinors(m, Kubernetes[len(Kubernetes)-1]) < 0:
		return m, Older, nil
	}
	return m, Inside, nil
}

// compareMinors orders two "X.Y" (as Minor gives them): -1, 0 or 1.
func compareMinors(a, b string) int {
	var am, an, bm, bn int
	fmt.Sscanf(a, "%d.%d", &am, &an)
	fmt.Sscanf(b, "%d.%d", &bm, &bn)
	if c := cmp.Compare(am, bm); c != 0 {
		return c
	}
	return cmp.Compare(an, bn)
}
