package mounts

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestUnder(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/1"), 0o755); err != nil {
		t.Fatal(err)
	}
	info := `22 1 0:21 / /run rw,nosuid,nodev shared:5 - tmpfs tmpfs rw
640 22 0:4 net:[4026532281] /run/cri-nstarget/pins/abc/pid rw shared:5 - nsfs nsfs rw
641 22 0:4 net:[4026532282] /run/cri-nstarget/pins/a\040b/ipc rw shared:5 - nsfs nsfs rw
642 22 0:4 net:[4026532283] /run/cri-nstarget-other/x rw shared:5 - nsfs nsfs rw
`
	if err := os.WriteFile(filepath.Join(root, "proc/1/mountinfo"), []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Host{Root: root}.Under("/run/cri-nstarget")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/run/cri-nstarget/pins/abc/pid", "/run/cri-nstarget/pins/a b/ipc"}
	if !slices.Equal(got, want) {
		t.Errorf("Under = %q, want %q", got, want)
	}
}

func TestUnitName(t *testing.T) {
	// systemd-escape --path --suffix=mount /run/cri-nstarget/pins/0a1b/pid
	if got, want := UnitName("/run/cri-nstarget/pins/0a1b/pid"), `run-cri\x2dnstarget-pins-0a1b-pid.mount`; got != want {
		t.Errorf("UnitName = %q, want %q", got, want)
	}
}

// units stops a unit by taking its mount out of the fake mount table.
type units struct {
	info    string // the mountinfo file
	stopped []string
	unmount map[string]string // unit -> the mountinfo line that stopping it removes
}

func (u *units) Stop(_ context.Context, name string) error {
	u.stopped = append(u.stopped, name)
	line, ok := u.unmount[name]
	if !ok {
		return errors.New("Unit " + name + " not loaded.")
	}
	b, err := os.ReadFile(u.info)
	if err != nil {
		return err
	}
	return os.WriteFile(u.info, bytes.Replace(b, []byte(line+"\n"), nil, 1), 0o644)
}

func TestUnmount(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/1"), 0o755); err != nil {
		t.Fatal(err)
	}
	pid := `640 22 0:4 net:[4026532281] /run/cri-nstarget/pins/abc/pid rw shared:5 - nsfs nsfs rw`
	ipc := `641 22 0:4 net:[4026532282] /run/cri-nstarget/pins/abc/ipc rw shared:5 - nsfs nsfs rw`
	info := filepath.Join(root, "proc/1/mountinfo")
	if err := os.WriteFile(info, []byte("22 1 0:21 / /run rw shared:5 - tmpfs tmpfs rw\n"+pid+"\n"+ipc+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := &units{info: info, unmount: map[string]string{`run-cri\x2dnstarget-pins-abc-pid.mount`: pid}}
	h := Host{Root: root, Units: u}
	if err := h.Unmount("/run/cri-nstarget/pins/abc/pid"); err != nil {
		t.Errorf("Unmount of a mount systemd stops: %v", err)
	}
	// A unit systemd cannot stop: the mount stays, and Unmount says so.
	err := h.Unmount("/run/cri-nstarget/pins/abc/ipc")
	if err == nil || !strings.Contains(err.Error(), "still mounted") {
		t.Errorf("Unmount of a mount that stays = %v, want still mounted", err)
	}
	// Gone already: the stop fails (no unit), the mount is not there: done.
	if err := h.Unmount("/run/cri-nstarget/pins/gone/pid"); err != nil {
		t.Errorf("Unmount of a mount already gone: %v", err)
	}
	if want := []string{`run-cri\x2dnstarget-pins-abc-pid.mount`, `run-cri\x2dnstarget-pins-abc-ipc.mount`, `run-cri\x2dnstarget-pins-gone-pid.mount`}; !slices.Equal(u.stopped, want) {
		t.Errorf("stopped %q, want %q", u.stopped, want)
	}
	if err := (Host{Root: root}).Unmount("/run/cri-nstarget/pins/abc/ipc"); err == nil {
		t.Error("Unmount without systemd succeeded")
	}
}
