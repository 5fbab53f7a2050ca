package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Changelog is CHANGELOG.md in Keep a Changelog's form (keepachangelog.com,
// 1.1.0): an optional "## [Unreleased]" section, then the releases, newest
// first, each "## [X.Y.Z] - YYYY-MM-DD"; link definitions ("[X.Y.Z]: URL")
// at the end.
type Changelog struct {
	Unreleased *Entry
	Releases   []Entry
}

// Entry is one section: "## [1.2.3] - 2026-11-28" (or "## [Unreleased]"), a
// paragraph, then groups ("### Added") of items ("- "...). A release's first
// group is "### Breaking / action required" (its item "None." when nothing
// is), so that no release hides what an operator must do.
type Entry struct {
	Version string    // "v1.2.3" (the heading's, with the v the tags and artifacts carry); empty for Unreleased
	Date    time.Time // midnight UTC of the heading's date; zero for Unreleased
	Intro   string    // the paragraph before the first group, joined into one line
	Groups  []Group
	Body    string // the section's text as written, heading excluded
}

// Group is one "### Name" of an entry.
type Group struct {
	Name  string
	Intro string   // a paragraph before its first item
	Items []string // each item joined into one line
}

// Breaking is the group every release opens with.
const Breaking = "Breaking / action required"

// groups are the group names allowed: Keep a Changelog's, Breaking first,
// and Known issues.
var groups = []string{Breaking, "Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Known issues"}

var (
	releaseHeading = regexp.MustCompile(`^## \[([0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?)\] - ([0-9]{4}-[0-9]{2}-[0-9]{2})$`)
	// linkDef is a link reference definition, "[1.2.3]: https://...".
	linkDef = regexp.MustCompile(`^\[[^\]]+\]: \S+$`)
	// VersionPattern is what make release accepts as VERSION.
	versionPattern = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?$`)
)

// Parse reads a changelog. Every "## " heading must be "## [Unreleased]" (at
// most once, first) or "## [X.Y.Z] - YYYY-MM-DD", and every "### " one a
// group of groups, a release's first being Breaking, so that a mistyped
// heading is an error and not a release or a warning that goes missing.
func Parse(data []byte) (*Changelog, error) {
	p := &parser{c: &Changelog{}}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		p.lineNo++
		line := strings.TrimRight(s.Text(), " \t")
		var err error
		switch {
		case linkDef.MatchString(line):
			p.links = true // the definitions at the end: no entry's words
		case p.links && line != "":
			err = errors.New("text after the link definitions, which end the file")
		case strings.HasPrefix(line, "## "):
			err = p.section(line)
		case p.cur != nil:
			err = p.text(line)
		}
		var le lineError
		if err != nil && !errors.As(err, &le) {
			err = lineError{p.lineNo, err}
		}
		if err != nil {
			return nil, err
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if err := p.flush(); err != nil {
		return nil, err
	}
	return p.c, nil
}

// parser is Parse's state: the entry being read and where its lines go.
type parser struct {
	c      *Changelog
	lineNo int
	cur    *Entry
	start  int // the line of cur's heading
	body   []string
	group  *Group
	para   *string // where continuation lines go: an intro or the last item
	links  bool    // the link definitions have begun
}

// lineError is an error at a line of the file.
type lineError struct {
	n   int
	err error
}

func (e lineError) Error() string { return fmt.Sprintf("line %d: %v", e.n, e.err) }

// flush ends the entry being read.
func (p *parser) flush() error {
	if p.cur == nil {
		return nil
	}
	if p.cur.Version != "" && (len(p.cur.Groups) == 0 || p.cur.Groups[0].Name != Breaking) {
		return lineError{p.start, fmt.Errorf("%s: a release opens with \"### %s\" (\"- None.\" when nothing is)", strings.TrimPrefix(p.cur.Version, "v"), Breaking)}
	}
	p.cur.Body = strings.Trim(strings.Join(p.body, "\n"), "\n") + "\n"
	if p.cur.Version == "" {
		p.c.Unreleased = p.cur
	} else {
		p.c.Releases = append(p.c.Releases, *p.cur)
	}
	return nil
}

// section starts the entry of a "## " heading.
func (p *parser) section(line string) error {
	if err := p.flush(); err != nil {
		return err
	}
	p.body, p.group, p.para, p.start = nil, nil, nil, p.lineNo
	c := p.c
	m := releaseHeading.FindStringSubmatch(line)
	switch {
	case line == "## [Unreleased]":
		if c.Unreleased != nil || len(c.Releases) > 0 {
			return errors.New("## [Unreleased] must come once, before the releases")
		}
		p.cur = &Entry{}
		return nil
	case m == nil:
		return fmt.Errorf(`%q: want "## [Unreleased]" or "## [X.Y.Z] - YYYY-MM-DD" (Keep a Changelog's form)`, line)
	}
	version := "v" + m[1]
	d, err := time.Parse(time.DateOnly, m[2])
	if err != nil {
		return fmt.Errorf("%q: %v", line, err)
	}
	for _, r := range c.Releases {
		if r.Version == version {
			return fmt.Errorf("%s has two entries", m[1])
		}
	}
	if n := len(c.Releases); n > 0 && d.After(c.Releases[n-1].Date) {
		return fmt.Errorf("%s is dated after %s, above it: the newest release comes first", m[1], strings.TrimPrefix(c.Releases[n-1].Version, "v"))
	}
	p.cur = &Entry{Version: version, Date: d}
	return nil
}

// text takes a line of the entry being read.
func (p *parser) text(line string) error {
	cur := p.cur
	p.body = append(p.body, line)
	switch {
	case strings.HasPrefix(line, "### "):
		name := strings.TrimPrefix(line, "### ")
		if !slices.Contains(groups, name) {
			return fmt.Errorf("%q: want one of %q", line, groups)
		}
		if name == Breaking && len(cur.Groups) > 0 {
			return fmt.Errorf("### %s comes first in its entry", Breaking)
		}
		cur.Groups = append(cur.Groups, Group{Name: name})
		p.group, p.para = &cur.Groups[len(cur.Groups)-1], nil
	case strings.HasPrefix(line, "- "):
		if p.group == nil {
			return errors.New("an item outside a ### group")
		}
		p.group.Items = append(p.group.Items, strings.TrimPrefix(line, "- "))
		p.para = &p.group.Items[len(p.group.Items)-1]
	case line == "":
		p.para = nil
	case strings.HasPrefix(line, "  ") && p.para != nil:
		*p.para += " " + strings.TrimSpace(line)
	case strings.HasPrefix(line, " "):
		return errors.New("an indented line that continues nothing")
	default: // a paragraph
		target := &cur.Intro
		if p.group != nil {
			target = &p.group.Intro
		}
		if p.para == target {
			*target += " " + line
		} else {
			*target = strings.TrimSpace(*target + " " + line)
		}
		p.para = target
	}
	return nil
}

// Find returns the entry of version: a release's, or, with unreleased, the
// Unreleased section standing for version, which must then be a
// prerelease (a test build, never a release) and is dated at date.
func (c *Changelog) Find(version string, unreleased bool, date time.Time) (Entry, []Entry, error) {
	if !versionPattern.MatchString(version) {
		return Entry{}, nil, fmt.Errorf("version %q: want vX.Y.Z or vX.Y.Z-PRERELEASE", version)
	}
	for i, r := range c.Releases {
		if r.Version == version {
			return r, c.Releases[i+1:], nil
		}
	}
	if unreleased {
		if !strings.Contains(version, "-") {
			return Entry{}, nil, fmt.Errorf("%s is a release: only a prerelease (vX.Y.Z-SOMETHING) may take the Unreleased section", version)
		}
		e := Entry{Version: version, Date: date.UTC()}
		if c.Unreleased != nil {
			e.Intro, e.Groups, e.Body = c.Unreleased.Intro, c.Unreleased.Groups, c.Unreleased.Body
		}
		return e, c.Releases, nil
	}
	newest := "none yet"
	if len(c.Releases) > 0 {
		newest = c.Releases[0].Version
	}
	return Entry{}, nil, fmt.Errorf("CHANGELOG.md has no entry for %s (the newest is %s): add a section "+
		"\"## [%s] - YYYY-MM-DD\" saying what changed for operators (### %s first, then Added, Changed, Fixed, Known issues...), "+
		"then make release again", version, newest, strings.TrimPrefix(version, "v"), Breaking)
}

// packageVersion is the .deb's and the .rpm's version of v: v1.2.3 is 1.2.3-1,
// v1.2.3-rc.1 is 1.2.3~rc.1-1 (it sorts before 1.2.3-1), as nfpm names them.
func packageVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	return strings.Replace(v, "-", "~", 1) + "-1"
}

var (
	mdLink = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)
	mdCode = strings.NewReplacer("`", "", "**", "")
)

// plain is markdown text as plain text: links as their words, no code or
// emphasis marks.
func plain(s string) string { return mdCode.Replace(mdLink.ReplaceAllString(s, "$1")) }

// wrap breaks s into lines of at most width columns, the first opening
// with first, the others with rest (a word longer than a line stays whole).
func wrap(s, first, rest string, width int) string {
	var b strings.Builder
	line, words := first, 0
	for _, w := range strings.Fields(s) {
		if words > 0 && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line, words = rest, 0
		}
		if words > 0 {
			line += " "
		}
		line += w
		words++
	}
	b.WriteString(line + "\n")
	return b.String()
}

// Debian renders entries (newest first) as a Debian changelog of package
// (deb-changelog(5)): lines of at most 80 columns, each entry dated at its
// date.
func Debian(pkg, maintainer string, entries []Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s (%s) unstable; urgency=medium\n\n", pkg, packageVersion(e.Version))
		if e.Intro != "" {
			b.WriteString(wrap(plain(e.Intro), "  * ", "    ", 79))
		}
		for _, g := range e.Groups {
			head := g.Name + ":"
			if g.Intro != "" {
				head += " " + g.Intro
			}
			b.WriteString(wrap(plain(head), "  * ", "    ", 79))
			for _, it := range g.Items {
				b.WriteString(wrap(plain(it), "    - ", "      ", 79))
			}
		}
		if e.Intro == "" && len(e.Groups) == 0 {
			b.WriteString("  * No change is recorded for this version.\n")
		}
		fmt.Fprintf(&b, "\n -- %s  %s\n", maintainer, e.Date.UTC().Format(time.RFC1123Z))
	}
	return b.String()
}

// RPM renders entries as nfpm's changelog file (goreleaser/chglog's YAML),
// which nfpm writes into the .rpm's %changelog: one change per item.
func RPM(maintainer string, entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "- semver: %s\n  date: %s\n  packager: %s\n  changes:\n",
			quote(packageVersion(e.Version)), e.Date.UTC().Format(time.RFC3339), quote(maintainer))
		var notes []string
		if e.Intro != "" {
			notes = append(notes, e.Intro)
		}
		for _, g := range e.Groups {
			for _, it := range g.Items {
				notes = append(notes, g.Name+": "+it)
			}
		}
		if len(notes) == 0 {
			notes = append(notes, "No change is recorded for this version.")
		}
		for _, n := range notes {
			fmt.Fprintf(&b, "    - note: %s\n", quote(strings.TrimSuffix(wrap(plain(n), "", "  ", 76), "\n")))
		}
	}
	return b.String()
}

// quote is s as a YAML double-quoted scalar.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
