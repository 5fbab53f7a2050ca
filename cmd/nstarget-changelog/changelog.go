package main

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Changelog is CHANGELOG.md: an optional Unreleased section, then the
// releases, newest first.
type Changelog struct {
	Unreleased *Entry
	Releases   []Entry
}

// Entry is one section: "## v1.2.3 - 2026-11-28" (or "## Unreleased"), a
// paragraph, then groups ("### Added") of items ("- ...").
type Entry struct {
	Version string    // "v1.2.3"; empty for Unreleased
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

var (
	releaseHeading = regexp.MustCompile(`^## (v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?) - ([0-9]{4}-[0-9]{2}-[0-9]{2})$`)
	// VersionPattern is what make release accepts as VERSION.
	versionPattern = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?$`)
)

// Parse reads a changelog. Every "## " heading must be "## Unreleased" (at
// most once, first) or "## vX.Y.Z - YYYY-MM-DD", so that a mistyped heading
// is an error and not a release that goes missing.
func Parse(data []byte) (*Changelog, error) {
	c := &Changelog{}
	var cur *Entry
	var body []string
	var group *Group
	var para *string // where continuation lines go: an intro or the last item
	lineNo := 0
	flush := func() {
		if cur == nil {
			return
		}
		cur.Body = strings.Trim(strings.Join(body, "\n"), "\n") + "\n"
		if cur.Version == "" {
			c.Unreleased = cur
		} else {
			c.Releases = append(c.Releases, *cur)
		}
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		lineNo++
		line := strings.TrimRight(s.Text(), " \t")
		if strings.HasPrefix(line, "## ") {
			flush()
			body, group, para = nil, nil, nil
			switch m := releaseHeading.FindStringSubmatch(line); {
			case line == "## Unreleased":
				if c.Unreleased != nil || len(c.Releases) > 0 {
					return nil, fmt.Errorf("line %d: ## Unreleased must come once, before the releases", lineNo)
				}
				cur = &Entry{}
			case m != nil:
				d, err := time.Parse(time.DateOnly, m[2])
				if err != nil {
					return nil, fmt.Errorf("line %d: %q: %v", lineNo, line, err)
				}
				for _, r := range c.Releases {
					if r.Version == m[1] {
						return nil, fmt.Errorf("line %d: %s has two entries", lineNo, m[1])
					}
				}
				if n := len(c.Releases); n > 0 && d.After(c.Releases[n-1].Date) {
					return nil, fmt.Errorf("line %d: %s is dated after %s, above it: the newest release comes first", lineNo, m[1], c.Releases[n-1].Version)
				}
				cur = &Entry{Version: m[1], Date: d}
			default:
				return nil, fmt.Errorf(`line %d: %q: want "## Unreleased" or "## vX.Y.Z - YYYY-MM-DD"`, lineNo, line)
			}
			continue
		}
		if cur == nil {
			continue // the title and the words above the first section
		}
		body = append(body, line)
		switch {
		case strings.HasPrefix(line, "### "):
			cur.Groups = append(cur.Groups, Group{Name: strings.TrimPrefix(line, "### ")})
			group, para = &cur.Groups[len(cur.Groups)-1], nil
		case strings.HasPrefix(line, "- "):
			if group == nil {
				return nil, fmt.Errorf("line %d: an item outside a ### group", lineNo)
			}
			group.Items = append(group.Items, strings.TrimPrefix(line, "- "))
			para = &group.Items[len(group.Items)-1]
		case line == "":
			para = nil
		case strings.HasPrefix(line, "  ") && para != nil:
			*para += " " + strings.TrimSpace(line)
		case strings.HasPrefix(line, " "):
			return nil, fmt.Errorf("line %d: an indented line that continues nothing", lineNo)
		default: // a paragraph
			target := &cur.Intro
			if group != nil {
				target = &group.Intro
			}
			if para == target {
				*target += " " + line
			} else {
				*target = strings.TrimSpace(*target + " " + line)
			}
			para = target
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	flush()
	return c, nil
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
		"\"## %s - YYYY-MM-DD\" saying what changed for operators (Added, Changed, Upgrade notes, Known issues), "+
		"then make release again", version, newest, version)
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
