package kubelet

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Flag is the kubelet's command-line flag for its runtime endpoint, and
// ConfigKey the KubeletConfiguration field that the flag overrides.
const (
	Flag      = "--container-runtime-endpoint"
	ConfigKey = "containerRuntimeEndpoint"
)

// Kind is what a file is to the kubelet.
type Kind int

const (
	// EnvFile is an EnvironmentFile= of the kubelet's unit: KEY=VALUE lines
	// (kubeadm's /var/lib/kubelet/kubeadm-flags.env, /etc/default/kubelet).
	EnvFile Kind = iota + 1
	// UnitFile is the kubelet's unit file or one of its drop-ins: its
	// Environment= and ExecStart= lines.
	UnitFile
	// ConfigFile is the KubeletConfiguration named by --config.
	ConfigFile
	// ConfigDropIn is a file of --config-dir, which overrides ConfigFile;
	// a later one (by name) overrides an earlier.
	ConfigDropIn
)

func (k Kind) String() string {
	switch k {
	case EnvFile:
		return "environment file"
	case UnitFile:
		return "unit file"
	case ConfigFile:
		return "KubeletConfiguration"
	case ConfigDropIn:
		return "KubeletConfiguration drop-in"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// File is one file that can set the endpoint, as read from the host.
type File struct {
	Path string // on the host
	Kind Kind
	Data []byte
}

// Node is what the installer read of the kubelet: its command line, and the
// files its unit reads (the unit file, its drop-ins, its environment files;
// a missing optional one left out) and, when the command line names them,
// its --config file and the files of --config-dir in the kubelet's order.
type Node struct {
	Argv  []string
	Files []File
}

// Place is where the endpoint is set: the bytes [Start, End) of the file at
// Path, or, with Insert, nowhere yet (a KubeletConfiguration without the
// key, which then means the kubelet's default).
type Place struct {
	Path       string
	Kind       Kind
	Start, End int
	Insert     bool
}

// Layout is the endpoint the kubelet runs with and the one place it comes
// from.
type Layout struct {
	Endpoint string
	Place    Place
}

// DefaultEndpoint is the kubelet's endpoint when nothing sets it.
const DefaultEndpoint = "unix:///run/containerd/containerd.sock"

// Find says which endpoint the kubelet of n runs with, and where it is set.
func Find(n Node) (Layout, error) {
	flags := parseArgs(n.Argv)
	if len(n.Argv) == 0 {
		return Layout{}, errors.New("the kubelet's command line is empty")
	}
	if ep, ok := flags.last(Flag); ok {
		return findFlag(n, ep)
	}
	cfgPath, ok := flags.last("--config")
	if !ok {
		return Layout{}, fmt.Errorf("the kubelet has neither %s nor --config on its command line: nowhere to set its runtime endpoint", Flag)
	}
	return findConfig(n, cfgPath)
}

// findFlag finds the one file that puts the kubelet's last
// --container-runtime-endpoint (ep) on its command line.
func findFlag(n Node, ep string) (Layout, error) {
	var found []occurrence
	for _, f := range n.Files {
		if f.Kind != EnvFile && f.Kind != UnitFile {
			continue
		}
		for _, o := range flagOccurrences(f) {
			if o.value == ep {
				found = append(found, o)
			}
		}
	}
	switch len(found) {
	case 0:
		return Layout{}, fmt.Errorf("the kubelet runs with %s=%s, which none of the files its unit reads sets (%s): it comes from somewhere this installer cannot change",
			Flag, ep, paths(n.Files, EnvFile, UnitFile))
	case 1:
	default:
		var where []string
		for _, o := range found {
			where = append(where, o.file.Path)
		}
		return Layout{}, fmt.Errorf("the kubelet's %s=%s is set in %d places (%s): set it in one", Flag, ep, len(found), strings.Join(where, ", "))
	}
	o := found[0]
	if err := changeable(o.file); err != nil {
		return Layout{}, err
	}
	return Layout{Endpoint: ep, Place: Place{Path: o.file.Path, Kind: o.file.Kind, Start: o.start, End: o.end}}, nil
}

// findConfig finds containerRuntimeEndpoint in the kubelet's configuration:
// the last --config-dir drop-in that sets it, else the --config file (or
// where it would go in it).
func findConfig(n Node, cfgPath string) (Layout, error) {
	var main *File
	for i := range n.Files {
		f := &n.Files[i]
		if f.Kind == ConfigFile && f.Path == cfgPath {
			main = f
		}
	}
	if main == nil {
		return Layout{}, fmt.Errorf("the kubelet's --config %s was not read", cfgPath)
	}
	for i := len(n.Files) - 1; i >= 0; i-- {
		f := n.Files[i]
		if f.Kind != ConfigDropIn {
			continue
		}
		v, err := configValue(f)
		if err != nil {
			return Layout{}, err
		}
		if v.set {
			if err := changeable(f); err != nil {
				return Layout{}, err
			}
			return Layout{Endpoint: v.value, Place: Place{Path: f.Path, Kind: f.Kind, Start: v.start, End: v.end}}, nil
		}
	}
	v, err := configValue(*main)
	if err != nil {
		return Layout{}, err
	}
	if err := changeable(*main); err != nil {
		return Layout{}, err
	}
	if !v.set {
		return Layout{Endpoint: DefaultEndpoint, Place: Place{Path: main.Path, Kind: ConfigFile, Start: v.start, End: v.start, Insert: true}}, nil
	}
	return Layout{Endpoint: v.value, Place: Place{Path: main.Path, Kind: ConfigFile, Start: v.start, End: v.end}}, nil
}

// changeable refuses files that belong to a package (under /usr or /lib:
// an upgrade would undo the change, or a changed file would stop the
// upgrade) or do not outlive a reboot (/run).
func changeable(f File) error {
	p := path.Clean(f.Path)
	for _, dir := range []string{"/usr/", "/lib/", "/run/"} {
		if strings.HasPrefix(p, dir) {
			return fmt.Errorf("the kubelet's runtime endpoint is set in %s (%s), under %s, which this installer does not change: set it in a drop-in under /etc/systemd/system/kubelet.service.d/, an environment file or the KubeletConfiguration",
				f.Path, f.Kind, strings.TrimSuffix(dir, "/"))
		}
	}
	return nil
}

func paths(files []File, kinds ...Kind) string {
	var ps []string
	for _, f := range files {
		for _, k := range kinds {
			if f.Kind == k {
				ps = append(ps, f.Path)
			}
		}
	}
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ", ")
}

// FlagValue is the value of the kubelet's last flag (e.g. "--kubeconfig")
// on its command line argv, as the kubelet reads it.
func FlagValue(argv []string, flag string) (string, bool) { return parseArgs(argv).last(flag) }

// args are the kubelet's flags as pflag reads them: --name=value or
// --name value, '_' and '-' alike in names, nothing after "--".
type args []string

func parseArgs(argv []string) args { return args(argv) }

// last is the value of the last occurrence of flag (e.g. "--config").
func (a args) last(flag string) (string, bool) {
	var v string
	var ok bool
	for i := 1; i < len(a); i++ {
		arg := a[i]
		if arg == "--" {
			break
		}
		if !strings.HasPrefix(arg, "--") {
			continue
		}
		name, value, hasValue := strings.Cut(arg, "=")
		if normalize(name) != flag {
			continue
		}
		if !hasValue {
			if i+1 >= len(a) {
				continue
			}
			i++
			value = a[i]
		}
		v, ok = value, true
	}
	return v, ok
}

// normalize is a flag name as pflag's word-separator normalization makes it.
func normalize(name string) string { return strings.ReplaceAll(name, "_", "-") }
