package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// tocMinLines: a document longer than this opens with a table of contents.
const tocMinLines = 150

// tocExempt are long documents without one, and why.
var tocExempt = map[string]string{
	"../CHANGELOG.md": "its sections are the releases, newest first (Keep a Changelog's form), linked at its foot",
}

// heading is one heading of a document, outside code blocks.
type heading struct {
	level  int
	title  string
	anchor string // as GitHub renders it, duplicates numbered
	line   int
}

var (
	headingLine = regexp.MustCompile(`^(#{1,6}) +(.*?)(?: +#+)? *$`)
	fenceLine   = regexp.MustCompile("^(```+|~~~+)")
)

// headings are a document's headings, with GitHub's anchors.
func headings(doc string) []heading {
	var out []heading
	seen := map[string]int{}
	fence := ""
	for i, l := range strings.Split(doc, "\n") {
		t := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if m := fenceLine.FindString(t); m != "" {
			fence = m
			continue
		}
		m := headingLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := slug(m[2])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, heading{level: len(m[1]), title: m[2], anchor: a, line: i + 1})
	}
	return out
}

// tocEntry is one line of a Contents list: "1. [Title](#anchor): what".
var tocEntry = regexp.MustCompile(`^(\d+)\. \[(.+?)\]\(#([^)\s]+)\)`)

// toc is the entries of the list under "## Contents": titles and anchors.
func toc(doc string) (entries [][2]string, ok bool) {
	_, after, ok := strings.Cut(doc, "\n## Contents\n")
	if !ok {
		return nil, false
	}
	for i, l := range strings.Split(after, "\n") {
		if strings.HasPrefix(l, "#") {
			break
		}
		if m := tocEntry.FindStringSubmatch(l); m != nil {
			if m[1] != fmt.Sprint(len(entries)+1) {
				entries = append(entries, [2]string{fmt.Sprintf("(numbered %s, line %d of the list)", m[1], i+1), ""})
			}
			entries = append(entries, [2]string{m[2], m[3]})
		}
	}
	return entries, true
}

// docsWithTOC are the documents whose Contents the test holds: every
// Markdown document of the repository's top, docs/ and docs/reports/.
func docsWithTOC(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"../*.md", "*.md", "reports/*.md"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %v: the test no longer finds the documents", files)
	}
	return files
}

// TestContents: each long document has a Contents list (its first section),
// and every document with one lists its sections (## headings), in order,
// each by its title and its anchor as GitHub makes it: a section added,
// renamed or moved without its entry fails here.
func TestContents(t *testing.T) {
	checked := 0
	for _, path := range docsWithTOC(t) {
		doc := read(t, path)
		entries, ok := toc(doc)
		long := strings.Count(doc, "\n") > tocMinLines
		if !ok {
			if long && tocExempt[path] == "" {
				t.Errorf("%s: %d lines and no \"## Contents\": a document over %d lines opens with one", path, strings.Count(doc, "\n"), tocMinLines)
			}
			continue
		}
		checked++
		var want [][2]string
		var first string
		for _, h := range headings(doc) {
			if h.level != 2 {
				continue
			}
			if first == "" {
				first = h.title
			}
			if h.title != "Contents" {
				want = append(want, [2]string{h.title, h.anchor})
			}
		}
		if first != "Contents" {
			t.Errorf("%s: its first section is %q: want the Contents first", path, first)
		}
		if fmt.Sprint(entries) != fmt.Sprint(want) {
			t.Errorf("%s: the Contents list differs from its sections:\n%s", path, entryDiff(entries, want))
		}
	}
	if checked < 8 {
		t.Errorf("checked the Contents of %d documents: the test no longer finds them", checked)
	}
}

// entryDiff says, line by line, where the list and the sections part.
func entryDiff(have, want [][2]string) string {
	var b strings.Builder
	for i := 0; i < max(len(have), len(want)); i++ {
		var h, w [2]string
		if i < len(have) {
			h = have[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if h != w {
			fmt.Fprintf(&b, "  entry %d: [%s](#%s); the section: [%s](#%s)\n", i+1, h[0], h[1], w[0], w[1])
		}
	}
	return b.String()
}

// slugKeeps are the characters GitHub keeps in an anchor (github-slugger):
// letters, marks, numbers, connector punctuation (_) and hyphens.
func slugKeeps(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r) || r == '-'
}

// markdownLink is a link's target: "](path.md#anchor)", "](#anchor)".
var markdownLink = regexp.MustCompile(`\]\(([^)\s]*)\)`)

// TestLinks: every link from one of the documents to a section, of its own
// or of another document of the repository, names a section that document
// has, and every link to a document names one that exists.
func TestLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		for _, h := range headings(read(t, path)) {
			a[h.anchor] = true
		}
		anchors[path] = a
		return a
	}
	links := 0
	for _, path := range docsWithTOC(t) {
		for _, m := range markdownLink.FindAllStringSubmatch(withoutCode(read(t, path)), -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || target != "" && !strings.HasSuffix(target, ".md") {
				continue
			}
			file := path
			if target != "" {
				file = filepath.Join(filepath.Dir(path), target)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links %s: %v", path, m[1], err)
					continue
				}
			}
			links++
			if anchor != "" && !anchorsOf(file)[anchor] {
				t.Errorf("%s links %s: %s has no section with the anchor #%s", path, m[1], file, anchor)
			}
		}
	}
	if links < 50 {
		t.Errorf("found %d links between the documents: the test no longer finds them", links)
	}
}

// withoutCode is doc without its fenced code blocks.
func withoutCode(doc string) string {
	var b strings.Builder
	fence := ""
	for _, l := range strings.Split(doc, "\n") {
		t := strings.TrimLeft(l, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
		case fenceLine.MatchString(t):
			fence = fenceLine.FindString(t)
		default:
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
