package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	conf "github.com/cri-nstarget/cri-nstarget/config"
)

// update rewrites the references instead of checking them (make docs).
var update = flag.Bool("update", false, "rewrite the flag and key reference in docs/operations.md and docs/cri-nstarget.8 (make docs)")

// The reference of flags and keys is made from the definition (package
// config's Config and Default, and ownFlags), never by hand: each document
// holds it between its markers.
var references = []struct {
	path, begin, end string
	render           func([]conf.Option) string
}{
	{"../../docs/operations.md", "<!-- BEGIN GENERATED: reference (make docs) -->", "<!-- END GENERATED: reference -->", markdownReference},
	{"../../docs/cri-nstarget.8", `.\" BEGIN GENERATED: reference (make docs)`, `.\" END GENERATED: reference`, roffReference},
}

// TestReference fails when docs/operations.md or the man page lists other flags,
// keys, defaults or meanings than the binary has.
func TestReference(t *testing.T) {
	opts := conf.Options(ownFlags(new(bool)))
	for _, ref := range references {
		doc, err := os.ReadFile(ref.path)
		if err != nil {
			t.Fatal(err)
		}
		body := ref.render(opts)
		want, have, err := splice(doc, ref.begin, ref.end, body)
		if err != nil {
			t.Fatalf("%s: %v", ref.path, err)
		}
		if have == body {
			continue
		}
		if *update {
			if err := os.WriteFile(ref.path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: reference rewritten", ref.path)
			continue
		}
		t.Errorf("%s: the flag and key reference differs from the binary's flags (config/config.go); run `make docs`:\n%s",
			strings.TrimPrefix(ref.path, "../../"), lineDiff(have, body))
	}
}

// splice replaces what lies between the lines begin and end of doc with
// body, and returns the new document and what lay there.
func splice(doc []byte, begin, end, body string) (out []byte, was string, err error) {
	s := string(doc)
	if strings.Count(s, "\n"+begin+"\n") != 1 || strings.Count(s, "\n"+end+"\n") != 1 {
		return nil, "", fmt.Errorf("want the lines %q and %q once each", begin, end)
	}
	i := strings.Index(s, "\n"+begin+"\n") + len(begin) + 2
	j := strings.Index(s, "\n"+end+"\n") + 1
	if j < i {
		return nil, "", fmt.Errorf("%q comes before %q", end, begin)
	}
	return []byte(s[:i] + body + s[j:]), s[i:j], nil
}

// lineDiff lists the lines of have that want lacks (-), then the lines of
// want that have lacks (+).
func lineDiff(have, want string) string {
	lines := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	h, w := lines(have), lines(want)
	var b strings.Builder
	for _, l := range strings.Split(have, "\n") {
		if !w[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if !h[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

// markdownReference is a table: flag, key, default, meaning.
func markdownReference(opts []conf.Option) string {
	cell := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace
	code := func(s string) string {
		if s == "" {
			return ""
		}
		return "`" + s + "`"
	}
	var b strings.Builder
	b.WriteString("| flag | key | default | meaning |\n|---|---|---|---|\n")
	for _, o := range opts {
		def := code(o.Default)
		if o.Default == "" {
			def = "empty"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code("--"+o.Flag), code(o.Key), def, cell(o.Meaning))
	}
	return b.String()
}

// roffReference is a tagged paragraph per flag, for the man page's OPTIONS.
func roffReference(opts []conf.Option) string {
	esc := strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace
	line := func(s string) string { // a text line must not open with a request
		if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
			return `\&` + s
		}
		return s
	}
	var b strings.Builder
	for _, o := range opts {
		head := `\fB\-\-` + esc(o.Flag) + `\fR`
		if o.Arg != "" {
			head += ` \fI` + o.Arg + `\fR`
		}
		if o.Key != "" {
			head += `, key \fB` + esc(o.Key) + `\fR`
		}
		fmt.Fprintf(&b, ".TP\n%s\n%s.\n", head, line(esc(strings.TrimSuffix(o.Meaning, "."))))
		if o.Default == "" {
			b.WriteString(".br\nDefault: empty.\n")
		} else {
			fmt.Fprintf(&b, ".br\nDefault: \\fI%s\\fR.\n", esc(o.Default))
		}
	}
	return b.String()
}

// TestReadmeKeys: the keys README.md's Configuration names are the
// binary's, with its defaults (the full reference is operations.md's).
func TestReadmeKeys(t *testing.T) {
	defaults := map[string]string{}
	for _, o := range conf.Options(ownFlags(new(bool))) {
		if o.Key != "" {
			defaults[o.Key] = o.Default
		}
	}
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Configuration\n")
	section, _, _ = strings.Cut(section, "\n## ")
	rows := 0
	for _, l := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if !strings.HasPrefix(l, "| `") || len(cells) < 3 {
			continue
		}
		rows++
		key := strings.Trim(strings.TrimSpace(cells[0]), "`")
		def, known := defaults[key]
		have := strings.TrimSpace(cells[1])
		want := "`" + def + "`"
		if def == "" {
			want = "empty"
		}
		switch {
		case !known:
			t.Errorf("README.md, Configuration: %q is no key of the binary's (config/config.go)", key)
		case !strings.HasPrefix(have, want):
			t.Errorf("README.md, Configuration: %s's default is %s; the binary's: %s", key, have, want)
		}
	}
	if !ok || rows < 4 {
		t.Errorf("README.md: %d rows of keys under \"## Configuration\": the test no longer finds them", rows)
	}
}
