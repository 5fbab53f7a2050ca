package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	conf "github.com/cri-nstarget/cri-nstarget/config"
	"github.com/cri-nstarget/cri-nstarget/preflight"
)

// checkCommand runs `cri-nstarget check [--config FILE] [--timeout D]
// [flags]`: the pre-flight of package preflight, one line per need of the
// node, "ok|warn|fail: what — what to do". It returns the exit code: 0 when
// nothing failed, 1 when something did, 2 for a usage error.
func checkCommand(ctx context.Context, args []string, stdout, stderr io.Writer, probe func(time.Duration) preflight.Probe) int {
	timeout := 3 * time.Second
	cfg, err := conf.Parse(args, stderr, func(fs *flag.FlagSet) {
		fs.DurationVar(&timeout, "timeout", timeout, "check: how long each of containerd's sockets, and the kubelet's --version, may take to answer")
	})
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case conf.IsUsage(err):
		return 2
	}
	results := []preflight.Result{preflight.Config(configPath(args), err)}
	if err != nil {
		fmt.Fprintln(stdout, results[0])
		fmt.Fprintln(stdout, "fail: the other checks need a valid configuration — fix it, then run cri-nstarget check again")
		return 1
	}
	results = append(results, preflight.Checks(cfg, preflight.Gather(ctx, cfg, probe(timeout)))...)
	return preflight.Write(stdout, results)
}

// configPath is the file conf.Parse read: --config's last value, else the
// default.
func configPath(args []string) string {
	path := conf.DefaultPath
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		switch {
		case a == "--":
			return path
		case strings.HasPrefix(a, "config="):
			path = strings.TrimPrefix(a, "config=")
		case a == "config" && i+1 < len(args):
			i++
			path = args[i]
		}
	}
	if path == "" {
		return "(none, --config \"\": the defaults)"
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return path + " (not there: the defaults)"
	}
	return path
}
