// Command nstarget-changelog reads CHANGELOG.md (Keep a Changelog's form:
// "## [X.Y.Z] - YYYY-MM-DD", each release opening with "### Breaking /
// action required") for make release
// (hack/release.sh): a version's entry as release notes, and the changelogs
// the .deb and the .rpm carry, all from the same text. A developer tool; the
// product never imports it.
//
//	nstarget-changelog check VERSION      exit 1, saying what to add, when VERSION has no entry
//	nstarget-changelog newest             the newest release that has an entry
//	nstarget-changelog list               every release, newest first, one a line
//	nstarget-changelog notes VERSION      the entry, as markdown, under a title
//	nstarget-changelog debian VERSION     changelog.Debian (VERSION's entry and the older ones)
//	nstarget-changelog rpm VERSION        nfpm's changelog file for the .rpm's %changelog
//
// Flags (before VERSION): --file (CHANGELOG.md), --package and --maintainer
// (debian, rpm), --unreleased (a prerelease VERSION without an entry takes the
// Unreleased section, dated --date, seconds since the epoch).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-changelog:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: nstarget-changelog check|newest|list|notes|debian|rpm [flags] [VERSION]")
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	file := fs.String("file", "CHANGELOG.md", "the changelog")
	pkg := fs.String("package", "cri-nstarget", "debian: the package's name")
	maintainer := fs.String("maintainer", "", "debian, rpm: the packages' maintainer, Name <email>")
	unreleased := fs.Bool("unreleased", false, "a prerelease VERSION without an entry of its own takes the Unreleased section (test builds)")
	epoch := fs.Int64("date", 0, "with --unreleased: its date, in seconds since the epoch (SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	c, err := Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	if cmd == "list" {
		for _, r := range c.Releases {
			fmt.Fprintln(out, r.Version)
		}
		return nil
	}
	if cmd == "newest" {
		if len(c.Releases) == 0 {
			return fmt.Errorf("%s has no release entry (## [X.Y.Z] - YYYY-MM-DD)", *file)
		}
		fmt.Fprintln(out, c.Releases[0].Version)
		return nil
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%s: want one VERSION, got %q", cmd, fs.Args())
	}
	entry, older, err := c.Find(fs.Arg(0), *unreleased, time.Unix(*epoch, 0))
	if err != nil {
		return err
	}
	if (cmd == "debian" || cmd == "rpm") && *maintainer == "" {
		return fmt.Errorf("%s: --maintainer is required", cmd)
	}
	switch cmd {
	case "check":
		fmt.Fprintf(out, "%s: %s, dated %s\n", *file, entry.Version, entry.Date.Format(time.DateOnly))
	case "notes":
		fmt.Fprintf(out, "# cri-nstarget %s (%s)\n\n", entry.Version, entry.Date.Format(time.DateOnly))
		if strings.TrimSpace(entry.Body) == "" {
			fmt.Fprintln(out, "No change is recorded for this version.")
		} else {
			fmt.Fprint(out, entry.Body)
		}
	case "debian":
		fmt.Fprint(out, Debian(*pkg, *maintainer, append([]Entry{entry}, older...)))
	case "rpm":
		fmt.Fprint(out, RPM(*maintainer, append([]Entry{entry}, older...)))
	default:
		return fmt.Errorf("unknown command %q (want check, newest, list, notes, debian or rpm)", cmd)
	}
	return nil
}
