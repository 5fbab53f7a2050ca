package server

import (
	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// createPins are the pins one create takes, for the container the backend
// makes (in its NRI event) or made (the Update path): taken in one step per
// container (take, which decide is handed), and released in one undo
// (release) but for those of the container the create answers with, when
// it joins them (keep). Until then
// they are marked in flight, so that the stale-pin sweep leaves the pins
// of a container containerd does not list yet.
//
// It belongs to the create, and has the create's decision's writer: the
// create's handler, or its NRI answer until nriplugin's Settle returns.
type createPins struct {
	store    pinStore
	inFlight *flights // the reconciler's: pins of creates in flight
	log      *logrus.Entry
	held     map[string]map[namespaces.Kind]string // container id -> kind -> pin; made by take
	kept     string                                // the container whose pins outlive the create (keep); "" for none
}

// take pins hs, and shm if not nil, for container id, and answers their
// paths: the namespaces first (nsErr: none stays pinned), then the
// /dev/shm (shmErr: the namespaces stay). What id holds already, from an
// earlier answer for the same container, is kept and answered.
func (c *createPins) take(id string, hs []*namespaces.Handle, shm *namespaces.Handle) (paths map[namespaces.Kind]string, nsErr, shmErr error) {
	if c.held == nil {
		c.held = map[string]map[namespaces.Kind]string{}
	}
	paths = c.held[id]
	if len(paths) == 0 {
		c.inFlight.add(id)
		c.held[id] = map[namespaces.Kind]string{} // released by release, whatever Hold leaves
		if err := c.store.Hold(id, hs); err != nil {
			return nil, err, nil
		}
		if paths, nsErr = c.store.Paths(id, hs); nsErr != nil {
			return nil, nsErr, nil
		}
		c.held[id] = paths
	}
	if shm != nil && paths[namespaces.Shm] == "" {
		path, err := c.store.Add(id, shm)
		if err != nil {
			return paths, nil, err
		}
		paths[namespaces.Shm] = path
	}
	return paths, nil, nil
}

// keep keeps the pins of container id past the create: the create
// answers with it, and it joins them.
func (c *createPins) keep(id string) { c.kept = id }

// release is the one undo of the create's pins: it unpins every container's
// but the one kept, and ends their mark in flight (the kept one's too: its
// create is over, and the backend lists it).
func (c *createPins) release() {
	for id := range c.held {
		if id != c.kept {
			if err := c.store.Release(id); err != nil {
				c.log.WithError(err).WithField("container", id).Warn("release pins")
			}
		}
		c.inFlight.done(id)
	}
}
