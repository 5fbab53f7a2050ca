package kubelet

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Endpoint is the runtime endpoint the kubelet of n runs with, and what
// sets it: its command line, a file of its configuration, or its default.
// Unlike Find it only reads: it neither needs the unit's files nor asks
// whether the place can be changed (cri-nstarget check reports it).
func Endpoint(n Node) (endpoint, from string, err error) {
	a := parseArgs(n.Argv)
	if ep, ok := a.last(Flag); ok {
		return ep, "its command line (" + Flag + ")", nil
	}
	cfgPath, ok := a.last("--config")
	if !ok {
		return DefaultEndpoint, "its default (neither " + Flag + " nor --config on its command line)", nil
	}
	for i := len(n.Files) - 1; i >= 0; i-- {
		if f := n.Files[i]; f.Kind == ConfigDropIn {
			ep, set, err := configEndpoint(f)
			if err != nil {
				return "", "", err
			}
			if set {
				return ep, f.Path, nil
			}
		}
	}
	for _, f := range n.Files {
		if f.Kind != ConfigFile || f.Path != cfgPath {
			continue
		}
		ep, set, err := configEndpoint(f)
		if err != nil {
			return "", "", err
		}
		if !set {
			return DefaultEndpoint, f.Path + " (no " + ConfigKey + ": the default)", nil
		}
		return ep, f.Path, nil
	}
	return "", "", fmt.Errorf("the kubelet's --config %s was not read", cfgPath)
}

// configEndpoint reads containerRuntimeEndpoint from a KubeletConfiguration
// (YAML or JSON), in whatever form it is written.
func configEndpoint(f File) (endpoint string, set bool, err error) {
	var c struct {
		Kind     string  `yaml:"kind"`
		Endpoint *string `yaml:"containerRuntimeEndpoint"`
	}
	if err := yaml.Unmarshal(f.Data, &c); err != nil {
		return "", false, fmt.Errorf("%s (%s): %w", f.Path, f.Kind, err)
	}
	if c.Kind != "KubeletConfiguration" && (f.Kind == ConfigFile || c.Kind != "") {
		return "", false, fmt.Errorf("%s (%s) has kind %q, want KubeletConfiguration", f.Path, f.Kind, c.Kind)
	}
	if c.Endpoint == nil {
		return "", false, nil
	}
	return *c.Endpoint, true, nil
}
