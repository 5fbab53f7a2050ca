package server

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// How a targeted container's spec is written (docs/design.md, "Two paths").
const (
	// ViaNRI: the shim answers containerd's NRI CreateContainer event for
	// the container with the namespace paths of the pins, inside
	// containerd's own CreateContainer; no spec Update follows.
	ViaNRI = "nri"
	// ViaUpdate: the shim updates the spec through containerd's API once
	// CreateContainer has returned (containerd 1.6, 2.1, NRI off or refused).
	ViaUpdate = "update"
	// ViaAuto: NRI where the backend offers it, Update otherwise.
	ViaAuto = "auto"
)

// nriAdapter is what a create sees of the NRI plugin (nriplugin.Plugin):
// it registers the answer to its event, and hears, once its request is
// answered, whether the event was answered on a live connection.
type nriAdapter interface {
	Expect(token string, c *nriplugin.Call) bool
	Settle(ctx context.Context, token string) (answered bool, refusal error)
	Refuse(err error)
	Usable() (bool, string)
}

// removalGate is what RemovePodSandbox waits for (nriplugin.Plugin.Removal).
type removalGate interface {
	Removal(ctx context.Context) (done func(), err error)
}

var _ nriAdapter = (*nriplugin.Plugin)(nil)

// pathOf is the path targeting takes while NRI is usable, or not.
func pathOf(nriUsable bool) string {
	if nriUsable {
		return ViaNRI
	}
	return ViaUpdate
}

// pathRecorder is a Metrics that also shows the targeting path.
type pathRecorder interface {
	TargetingPath(via string)
}

// pluginPathOf is the plugin mode's path: NRI while it is usable, none
// otherwise (containerd then creates as it would without cri-nstarget).
func pluginPathOf(nriUsable bool) string {
	if nriUsable {
		return ViaNRI
	}
	return viaNone
}

// viaNone: the plugin mode is not connected to a usable NRI.
const viaNone = "none"

// newNRI is the shim as an NRI plugin on socket, which says each change of
// the targeting path (pathOf or pluginPathOf) in the log and the metrics
// (m); Server.Run runs it.
func newNRI(socket string, log *logrus.Entry, m Metrics, pathOf func(bool) string) *nriplugin.Plugin {
	path := func(usable bool, why string) {
		via := pathOf(usable)
		if r, ok := m.(pathRecorder); ok {
			r.TargetingPath(via)
		}
		log.WithFields(logrus.Fields{"via": via, "why": why}).Info("targeting path")
	}
	p := nriplugin.New(socket, log, path)
	path(p.Usable())
	return p
}
