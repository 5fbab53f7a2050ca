package critesting

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveSandboxes stops and removes every pod sandbox through rt, as the
// kubelet's garbage collection does for deleted pods: run through a shim
// once the kubelet has stopped, it lets the shim sweep each pod's pins.
// It goes on past a failure and returns them all.
func RemoveSandboxes(rt runtimeapi.RuntimeServiceClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range resp.GetItems() {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s: %w", sb.GetId(), err))
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s: %w", sb.GetId(), err))
		}
	}
	return errors.Join(errs...)
}
