package kubelet

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/installer/hostfs"
)

// Unit is what systemd says of the kubelet's unit: its file, its drop-ins
// and its environment files, in the order systemd reads them.
type Unit struct {
	FragmentPath     string            `json:"fragmentPath"`
	DropInPaths      []string          `json:"dropInPaths"`
	EnvironmentFiles []EnvironmentFile `json:"environmentFiles"`
}

// EnvironmentFile is one EnvironmentFile= of a unit; Optional ("-path")
// may be missing.
type EnvironmentFile struct {
	Path     string `json:"path"`
	Optional bool   `json:"optional"`
}

// maxFile bounds what is read of one file: kubelet configurations and unit
// files are a few KiB.
const maxFile = 1 << 20

// Read reads, under root (the host's / as the installer sees it), the files
// of u and those the command line names (--config, the *.conf files of
// --config-dir, in name order), into a Node. Paths in the Node are the
// host's.
func Read(root string, argv []string, u Unit) (Node, error) {
	n := Node{Argv: argv}
	add := func(p string, k Kind, optional bool) error {
		if !path.IsAbs(p) {
			return fmt.Errorf("%s %q is not an absolute path", k, p)
		}
		b, err := readFile(hostfs.Path(root, p))
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the kubelet's %s: %w", k, err)
		}
		n.Files = append(n.Files, File{Path: p, Kind: k, Data: b})
		return nil
	}
	if u.FragmentPath != "" {
		if err := add(u.FragmentPath, UnitFile, false); err != nil {
			return Node{}, err
		}
	}
	for _, p := range u.DropInPaths {
		if err := add(p, UnitFile, false); err != nil {
			return Node{}, err
		}
	}
	for _, e := range u.EnvironmentFiles {
		if err := add(e.Path, EnvFile, e.Optional); err != nil {
			return Node{}, err
		}
	}
	a := parseArgs(argv)
	if p, ok := a.last("--config"); ok {
		if err := add(p, ConfigFile, false); err != nil {
			return Node{}, err
		}
	}
	if dir, ok := a.last("--config-dir"); ok {
		if !path.IsAbs(dir) {
			return Node{}, fmt.Errorf("--config-dir %q is not an absolute path", dir)
		}
		entries, err := os.ReadDir(hostfs.Path(root, dir))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Node{}, fmt.Errorf("read the kubelet's --config-dir: %w", err)
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".conf") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, name := range names {
			if err := add(path.Join(dir, name), ConfigDropIn, false); err != nil {
				return Node{}, err
			}
		}
	}
	return n, nil
}

func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, maxFile)
	}
	return b, nil
}
