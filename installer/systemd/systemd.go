// Package systemd is the installer's way to the host's systemd: its D-Bus
// API on the private socket (/run/systemd/private, under the host's root
// as the pod sees it), through go-systemd's dbus package. Jobs (start,
// restart, stop) return once systemd reports their result; anything but
// "done" is an error naming it.
package systemd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/cri-nstarget/cri-nstarget/installer"
	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// Conn is a connection to the host's systemd.
type Conn struct {
	c *sdbus.Conn
}

// Dial connects to systemd's private socket at path (e.g.
// /host/run/systemd/private): no bus daemon is needed, and systemd sends
// job signals to every direct connection.
func Dial(ctx context.Context, path string) (*Conn, error) {
	c, err := sdbus.NewConnection(func() (*dbus.Conn, error) {
		conn, err := dbus.Dial("unix:path="+path, dbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		// EXTERNAL with the uid, as go-systemd does for its own socket.
		if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	})
	if err != nil {
		return nil, fmt.Errorf("connect to systemd at %s: %w", path, err)
	}
	return &Conn{c: c}, nil
}

// Close closes the connection.
func (c *Conn) Close() { c.c.Close() }

// Unit reads what the installer needs of a unit.
func (c *Conn) Unit(ctx context.Context, name string) (installer.Unit, error) {
	p, err := c.c.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return installer.Unit{}, fmt.Errorf("read unit %s: %w", name, err)
	}
	u := installer.Unit{}
	u.LoadState, _ = p["LoadState"].(string)
	u.ActiveState, _ = p["ActiveState"].(string)
	u.Files.FragmentPath, _ = p["FragmentPath"].(string)
	u.Files.DropInPaths, _ = p["DropInPaths"].([]string)
	// Only a service has Service properties: asking them of a timer is
	// an error.
	if u.LoadState != "loaded" || !strings.HasSuffix(name, ".service") {
		return u, nil
	}
	s, err := c.c.GetUnitTypePropertiesContext(ctx, name, "Service")
	if err != nil {
		return installer.Unit{}, fmt.Errorf("read service %s: %w", name, err)
	}
	if pid, ok := s["MainPID"].(uint32); ok {
		u.MainPID = int(pid)
	}
	u.Files.EnvironmentFiles = environmentFiles(s["EnvironmentFiles"])
	return u, nil
}

// environmentFiles reads EnvironmentFiles, a(sb): each path and whether it
// may be missing ("-path").
func environmentFiles(v any) []kubelet.EnvironmentFile {
	var out []kubelet.EnvironmentFile
	list, _ := v.([][]any)
	for _, e := range list {
		if len(e) != 2 {
			continue
		}
		path, _ := e[0].(string)
		optional, _ := e[1].(bool)
		out = append(out, kubelet.EnvironmentFile{Path: path, Optional: optional})
	}
	return out
}

// job starts a job and waits for its result.
func job(ctx context.Context, verb, name string, start func(ch chan<- string) (int, error)) error {
	ch := make(chan string, 1)
	if _, err := start(ch); err != nil {
		return fmt.Errorf("%s %s: %w", verb, name, err)
	}
	select {
	case r := <-ch:
		if r != "done" {
			return fmt.Errorf("%s %s: job %s", verb, name, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: %w", verb, name, ctx.Err())
	}
}

// Start starts a unit ("replace" mode) and waits for the job.
func (c *Conn) Start(ctx context.Context, name string) error {
	return job(ctx, "start", name, func(ch chan<- string) (int, error) { return c.c.StartUnitContext(ctx, name, "replace", ch) })
}

// Restart restarts a unit and waits for the job.
func (c *Conn) Restart(ctx context.Context, name string) error {
	return job(ctx, "restart", name, func(ch chan<- string) (int, error) { return c.c.RestartUnitContext(ctx, name, "replace", ch) })
}

// Stop stops a unit and waits for the job.
func (c *Conn) Stop(ctx context.Context, name string) error {
	return job(ctx, "stop", name, func(ch chan<- string) (int, error) { return c.c.StopUnitContext(ctx, name, "replace", ch) })
}

// Enable makes the unit's [Install] links (systemctl enable).
func (c *Conn) Enable(ctx context.Context, name string) error {
	if _, _, err := c.c.EnableUnitFilesContext(ctx, []string{name}, false, false); err != nil {
		return fmt.Errorf("enable %s: %w", name, err)
	}
	return nil
}

// Disable removes them (systemctl disable).
func (c *Conn) Disable(ctx context.Context, name string) error {
	if _, err := c.c.DisableUnitFilesContext(ctx, []string{name}, false); err != nil {
		return fmt.Errorf("disable %s: %w", name, err)
	}
	return nil
}

// Reload is systemctl daemon-reload.
func (c *Conn) Reload(ctx context.Context) error {
	if err := c.c.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	return nil
}
