package main

import (
	"fmt"
	"io"

	conf "github.com/cri-nstarget/cri-nstarget/config"
)

// configCommand runs `cri-nstarget config default` (the defaults as TOML,
// what `make install` puts in /etc/cri-nstarget/config.toml) and
// `cri-nstarget config check [--config FILE] [flags]` (the configuration
// those would start with, or why it cannot start). It returns the exit code.
func configCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: cri-nstarget config default | cri-nstarget config check [--config FILE] [flags]")
		return 2
	}
	var cfg conf.Config
	switch args[0] {
	case "default":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "cri-nstarget config default: unexpected arguments %q\n", args[1:])
			return 2
		}
		cfg = conf.Default()
	case "check":
		var err error
		if cfg, err = conf.Parse(args[1:], stderr, nil); err != nil {
			if !conf.IsUsage(err) {
				fmt.Fprintln(stderr, "cri-nstarget:", err)
			}
			return 2
		}
	default:
		fmt.Fprintf(stderr, "cri-nstarget config: unknown command %q (want default or check)\n", args[0])
		return 2
	}
	b, err := cfg.Marshal()
	if err != nil {
		fmt.Fprintln(stderr, "cri-nstarget:", err)
		return 1
	}
	stdout.Write(b)
	return 0
}
