package cluster

import (
	"context"
	"errors"
)

// RestartKubeletOn restarts the kubelet as RestartKubelet does, with the
// same feature gates, on another CRI endpoint (its containerRuntimeEndpoint
// and imageServiceEndpoint): e.g. from a shim to the containerd behind it,
// which serves the same pods, and back (nstarget-bench node).
func (c *Cluster) RestartKubeletOn(ctx context.Context, endpoint string) error {
	if c.kubelet() == nil {
		return errors.New("cluster: no kubelet to restart")
	}
	c.kubeletSettings.Runtime = endpoint
	return c.RestartKubelet(ctx, c.kubeletSettings.FeatureGates)
}

// KubeletPID is the running kubelet's pid, 0 when none runs.
func (c *Cluster) KubeletPID() int {
	if p := c.kubelet(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}
