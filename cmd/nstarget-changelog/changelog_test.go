package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sample = `# Changelog

Words above the first section.

## [Unreleased]

### Added
- nothing yet

## [1.1.0-rc.1] - 2026-12-02

### Breaking / action required
- None.

### Fixed
- a fix

## [1.0.0] - 2026-12-01

The first one, with ` + "`code`" + ` and a [link](https://example.com).
It goes on here.

### Breaking / action required
- restart it

### Added
- one thing, long enough to wrap: aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm
  nnnn oooo
- another

### Changed
For builds before it:
- a default

[Unreleased]: https://example.com/compare/v1.1.0-rc.1...HEAD
[1.1.0-rc.1]: https://example.com/v1.1.0-rc.1
[1.0.0]: https://example.com/v1.0.0
`

func TestParse(t *testing.T) {
	c, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if c.Unreleased == nil || len(c.Releases) != 2 || c.Releases[0].Version != "v1.1.0-rc.1" || c.Releases[1].Version != "v1.0.0" {
		t.Fatalf("parsed %+v", c)
	}
	r := c.Releases[1]
	if r.Date != time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) {
		t.Errorf("date %v", r.Date)
	}
	if r.Intro != "The first one, with `code` and a [link](https://example.com). It goes on here." {
		t.Errorf("intro %q", r.Intro)
	}
	if len(r.Groups) != 3 || r.Groups[0].Name != Breaking || r.Groups[1].Name != "Added" || len(r.Groups[1].Items) != 2 || !strings.HasSuffix(r.Groups[1].Items[0], "mmmm nnnn oooo") {
		t.Errorf("groups %+v", r.Groups)
	}
	if r.Groups[2].Intro != "For builds before it:" || r.Groups[2].Items[0] != "a default" {
		t.Errorf("changed %+v", r.Groups[2])
	}
	// The link definitions that end the file are no entry's words.
	if !strings.HasPrefix(r.Body, "The first one") || !strings.HasSuffix(r.Body, "- a default\n") {
		t.Errorf("body %q", r.Body)
	}
}

func TestParseRefuses(t *testing.T) {
	const b = "### Breaking / action required\n- None.\n"
	for _, tc := range []struct{ doc, want string }{
		{"## [1.0] - 2026-12-01\n", `line 1: "## [1.0] - 2026-12-01": want "## [Unreleased]" or "## [X.Y.Z] - YYYY-MM-DD"`},
		{"## v1.0.0 - 2026-12-01\n", `want "## [Unreleased]" or "## [X.Y.Z] - YYYY-MM-DD" (Keep a Changelog's form)`},
		{"## Unreleased\n", `want "## [Unreleased]"`},
		{"## [1.0.0] (2026-12-01)\n", `want "## [Unreleased]"`},
		{"## [1.0.0] - 2026-13-01\n", "month out of range"},
		{"## [1.0.0] - 2026-12-01\n- an item\n", "line 2: an item outside a ### group"},
		{"## [1.0.0] - 2026-12-01\n" + b + "## [1.0.0] - 2026-11-01\n" + b, "1.0.0 has two entries"},
		{"## [1.0.0] - 2026-11-01\n" + b + "## [0.9.0] - 2026-12-01\n" + b, "0.9.0 is dated after 1.0.0"},
		{"## [1.0.0] - 2026-12-01\n" + b + "## [Unreleased]\n", "before the releases"},
		{"## [1.0.0] - 2026-12-01\n" + b + "### Added\n\n  stray\n", "continues nothing"},
		{"## [1.0.0] - 2026-12-01\n### Added\n- x\n", `line 1: 1.0.0: a release opens with "### Breaking / action required"`},
		{"## [1.1.0] - 2026-12-01\n" + b + "## [1.0.0] - 2026-11-01\n### Fixed\n- x\n\n[1.0.0]: https://x\n", `line 4: 1.0.0: a release opens with`},
		{"## [1.0.0] - 2026-12-01\n### Added\n- x\n" + b, "comes first"},
		{"## [1.0.0] - 2026-12-01\n" + b + "### Upgrade notes\n", `"### Upgrade notes": want one of`},
		{"## [1.0.0] - 2026-12-01\n" + b + "\n[1.0.0]: https://x\nmore words\n", "line 6: text after the link definitions"},
	} {
		if _, err := Parse([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestFind(t *testing.T) {
	c, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	e, older, err := c.Find("v1.1.0-rc.1", false, time.Time{})
	if err != nil || e.Version != "v1.1.0-rc.1" || len(older) != 1 {
		t.Errorf("v1.1.0-rc.1: %+v %d %v", e, len(older), err)
	}
	_, _, err = c.Find("v1.2.0", false, time.Time{})
	if err == nil || !strings.Contains(err.Error(), `no entry for v1.2.0 (the newest is v1.1.0-rc.1): add a section "## [1.2.0] - YYYY-MM-DD"`) {
		t.Errorf("v1.2.0: %v", err)
	}
	// A test build: a prerelease without an entry takes Unreleased.
	when := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	e, older, err = c.Find("v0.0.0-ci.1", true, when)
	if err != nil || e.Version != "v0.0.0-ci.1" || e.Date != when || len(e.Groups) != 1 || e.Groups[0].Items[0] != "nothing yet" || len(older) != 2 {
		t.Errorf("v0.0.0-ci.1: %+v %d %v", e, len(older), err)
	}
	if _, _, err = c.Find("v1.2.0", true, when); err == nil || !strings.Contains(err.Error(), "only a prerelease") {
		t.Errorf("v1.2.0 --unreleased: %v", err)
	}
	if _, _, err = c.Find("1.0.0", false, when); err == nil {
		t.Error("1.0.0 without v: no error")
	}
}

func TestDebian(t *testing.T) {
	c, _ := Parse([]byte(sample))
	e, older, _ := c.Find("v1.1.0-rc.1", false, time.Time{})
	got := Debian("pkg", "M <m@example.com>", append([]Entry{e}, older...))
	for _, want := range []string{
		"pkg (1.1.0~rc.1-1) unstable; urgency=medium\n\n  * Breaking / action required:\n    - None.\n  * Fixed:\n    - a fix\n\n -- M <m@example.com>  Wed, 02 Dec 2026 00:00:00 +0000\n\npkg (1.0.0-1)",
		"  * The first one, with code and a link. It goes on here.\n",
		"  * Changed: For builds before it:\n    - a default\n",
		"    - one thing, long enough to wrap: aaaa bbbb cccc dddd eeee ffff gggg hhhh\n      iiii",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if len(l) > 80 {
			t.Errorf("longer than 80: %q", l)
		}
	}
	// dpkg's own parser reads it, when it is here (make deps installs dpkg-dev).
	if _, err := exec.LookPath("dpkg-parsechangelog"); err == nil {
		f := filepath.Join(t.TempDir(), "changelog")
		os.WriteFile(f, []byte(got), 0o644)
		out, err := exec.Command("dpkg-parsechangelog", "-l", f, "--all", "--format", "rfc822").CombinedOutput()
		var versions []string
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "Version: "); ok {
				versions = append(versions, v)
			}
		}
		if err != nil || bytes.Contains(out, []byte("warning")) || strings.Join(versions, " ") != "1.1.0~rc.1-1 1.0.0-1" {
			t.Errorf("dpkg-parsechangelog: %v, versions %q:\n%s", err, versions, out)
		}
	}
}

func TestRPM(t *testing.T) {
	c, _ := Parse([]byte(sample))
	e, older, _ := c.Find("v1.0.0", false, time.Time{})
	got := RPM(`M "q" <m@example.com>`, append([]Entry{e}, older...))
	want := `- semver: "1.0.0-1"
  date: 2026-12-01T00:00:00Z
  packager: "M \"q\" <m@example.com>"
  changes:
    - note: "The first one, with code and a link. It goes on here."
    - note: "Breaking / action required: restart it"
    - note: "Added: one thing, long enough to wrap: aaaa bbbb cccc dddd eeee ffff gggg\n  hhhh iiii jjjj kkkk llll mmmm nnnn oooo"
    - note: "Added: another"
    - note: "Changed: a default"
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestMakefileVersion: what the Makefile stamps when VERSION is not given
// (make print-version) is CHANGELOG.md's newest release as Parse reads it, a
// vX.Y.Z: a clone without tags builds that version. A heading the parser does
// not know makes Parse fail here, and make refuse to build.
func TestMakefileVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed:", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatalf("CHANGELOG.md: %v", err)
	}
	if len(c.Releases) == 0 {
		t.Fatal("CHANGELOG.md has no release heading (## [X.Y.Z] - YYYY-MM-DD)")
	}
	want := c.Releases[0].Version
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", root, "print-version")
	// As from a shell: no VERSION, nothing from a make that runs this test.
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "VERSION", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make print-version: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != want || !versionPattern.MatchString(got) {
		t.Errorf("make print-version = %q, want CHANGELOG.md's newest release %q", got, want)
	}
}

// list prints every release, newest first, as release-check takes them for
// the packages' changelogs.
func TestRunList(t *testing.T) {
	f := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(f, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run([]string{"list", "--file", f}, &out); err != nil || out.String() != "v1.1.0-rc.1\nv1.0.0\n" {
		t.Errorf("list: %q, %v; want v1.1.0-rc.1 and v1.0.0", out.String(), err)
	}
}
