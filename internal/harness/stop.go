package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criCleanupTimeout bounds the removal of pods and containers through CRI.
const criCleanupTimeout = time.Minute

// Stop leaves the machine as it was found: it stops and removes every pod
// and container through CRI, stops containerd (SIGTERM, then SIGKILL),
// force-deletes with runc any container CRI could not remove, kills any shim
// of this containerd still running and everything below it, unmounts
// everything under Dir, removes Dir and, if no other Containerd runs, the
// empty residue outside it (see residue). Later calls return the first
// call's result.
func (c *Containerd) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	var errs []error
	if c.running() {
		errs = append(errs, c.removeAll())
	}
	errs = append(errs,
		c.stopProcess(),
		deleteRuncContainers(c.Dir, cmp.Or(c.opts.Runc, "runc")),
		killShims(c.Address()),
		UnmountAll(c.Dir),
	)
	if err := os.RemoveAll(c.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.Dir, err))
	}
	errs = append(errs, unlockHost(c.hostLock))
	c.hostLock = nil
	if c.stopErr = errors.Join(errs...); c.stopErr != nil {
		c.stopErr = fmt.Errorf("stop containerd in %s: %w", c.Dir, c.stopErr)
	}
	return c.stopErr
}

// running reports whether containerd was started and has not exited.
// The caller holds c.mu.
func (c *Containerd) running() bool {
	if c.cmd == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// removeAll stops and removes every container and pod sandbox through CRI,
// so that their shims exit.
func (c *Containerd) removeAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), criCleanupTimeout)
	defer cancel()
	conn, err := Dial(c.Endpoint())
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtime.NewRuntimeServiceClient(conn)
	ctrs, err := rt.ListContainers(ctx, &runtime.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, ctr := range ctrs.Containers {
		if _, err := rt.StopContainer(ctx, &runtime.StopContainerRequest{ContainerId: ctr.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop container %s: %w", ctr.Id, err))
		}
		if _, err := rt.RemoveContainer(ctx, &runtime.RemoveContainerRequest{ContainerId: ctr.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", ctr.Id, err))
		}
	}
	pods, err := rt.ListPodSandbox(ctx, &runtime.ListPodSandboxRequest{})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list pod sandboxes: %w", err))...)
	}
	for _, pod := range pods.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtime.StopPodSandboxRequest{PodSandboxId: pod.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s: %w", pod.Id, err))
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtime.RemovePodSandboxRequest{PodSandboxId: pod.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s: %w", pod.Id, err))
		}
	}
	return errors.Join(errs...)
}
