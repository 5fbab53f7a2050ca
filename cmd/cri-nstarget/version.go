package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Build stamps, set by the linker in `make build`, `make install` and `make
// release` (the Makefile's LDFLAGS):
//
//	-X main.version=v1.2.3 -X main.commit=<sha>[-dirty] -X main.date=<the commit's time, RFC 3339 UTC>
//
// The date is the commit's, not the clock's, so that a build is reproducible.
// A plain `go build` or `go install` leaves them empty: currentBuild then
// takes what the Go toolchain recorded in the binary.
var version, commit, date string

// build is what --version prints, the log line "serving CRI" and the metric
// cri_nstarget_build_info carry.
type build struct {
	Version string // v1.2.3; a module pseudo-version; or "(devel)"
	Commit  string // full sha, "-dirty" when built from a changed tree; or "unknown"
	Date    string // the commit's time; or "unknown"
}

func (b build) String() string {
	return fmt.Sprintf("cri-nstarget %s (commit %s, built %s; CRI v1, %s %s/%s)",
		b.Version, b.Commit, b.Date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func currentBuild() build {
	bi, _ := debug.ReadBuildInfo()
	return resolveBuild(version, commit, date, bi)
}

// resolveBuild prefers the linker's stamps; each one missing is taken from
// the build info: the module version (`go install ...@v1.2.3`, or the
// pseudo-version Go 1.24+ derives from the checkout) and the vcs.* settings
// (`go build` in a git checkout, unless -buildvcs=false). What neither
// knows is said to be unknown, never guessed.
func resolveBuild(ldVersion, ldCommit, ldDate string, bi *debug.BuildInfo) build {
	b := build{Version: ldVersion, Commit: ldCommit, Date: ldDate}
	var rev, when string
	modified := false
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	if b.Commit == "" && rev != "" {
		b.Commit = rev
		if modified {
			b.Commit += "-dirty"
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = when
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}
