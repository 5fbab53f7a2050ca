// Command nojoinruntime is the tests' stand-in for a sandboxed runtime (a
// VM or user-space-kernel runtime such as Kata or gVisor, which runs the
// pod in a kernel of its own and so ignores the host namespace paths a spec
// names): a real runc behind a wrapper. On `create` it removes the path
// from the PID namespace entry of the bundle's config.json, so that the
// container starts in a PID namespace of its own whatever its spec named;
// then, for every command, it executes runc with the same arguments.
//
// The e2e harness builds it with the runc to run baked in
// (-ldflags "-X main.runc=/path/to/runc") and configures it as a containerd
// runtime handler (the runc shim, BinaryName this binary) behind a
// RuntimeClass.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// runc is the real runc, set at build time.
var runc = "runc"

func main() {
	args := os.Args[1:]
	if i := slices.Index(args, "create"); i >= 0 {
		if err := dropPIDPath(filepath.Join(bundle(args[i+1:]), "config.json")); err != nil {
			fmt.Fprintln(os.Stderr, "nojoinruntime:", err)
			os.Exit(1)
		}
	}
	err := syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
	fmt.Fprintln(os.Stderr, "nojoinruntime: exec", runc+":", err)
	os.Exit(1)
}

// bundle is the --bundle (-b) of create's arguments; the working directory
// without one, as runc takes it.
func bundle(args []string) string {
	for i, a := range args {
		switch {
		case (a == "--bundle" || a == "-b" || a == "-bundle") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--bundle="):
			return strings.TrimPrefix(a, "--bundle=")
		}
	}
	return "."
}

// dropPIDPath removes the path of the PID namespace entry of the spec at
// path, keeping everything else (fields unknown here too).
func dropPIDPath(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var linux map[string]json.RawMessage
	if err := json.Unmarshal(spec["linux"], &linux); err != nil {
		return fmt.Errorf("%s: linux: %w", path, err)
	}
	var nss []map[string]any
	if err := json.Unmarshal(linux["namespaces"], &nss); err != nil {
		return fmt.Errorf("%s: linux.namespaces: %w", path, err)
	}
	for _, ns := range nss {
		if ns["type"] == "pid" {
			delete(ns, "path")
		}
	}
	if linux["namespaces"], err = json.Marshal(nss); err != nil {
		return err
	}
	if spec["linux"], err = json.Marshal(linux); err != nil {
		return err
	}
	if b, err = json.Marshal(spec); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
