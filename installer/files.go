package installer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/cri-nstarget/cri-nstarget/installer/hostfs"
	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// writeFile writes data to the host's path (under root) atomically: a
// temporary file in the same directory, synced, renamed over it, and the
// directory synced; a crash leaves the old file or the new, never half of
// one. Missing directories are made (0755).
func writeFile(root, path string, data []byte, mode fs.FileMode) (retErr error) {
	p := hostfs.Path(root, path)
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readHost reads the host's path; ok is false when it does not exist.
func readHost(root, path string) ([]byte, bool, error) {
	b, err := os.ReadFile(hostfs.Path(root, path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// removeHost removes the host's path; a missing file is not an error. The
// directory holding it is synced.
func removeHost(root, path string) error {
	p := hostfs.Path(root, path)
	err := os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

// removeEmptyDirs removes the host's directories, in order, each only if
// empty.
func removeEmptyDirs(root string, dirs ...string) {
	for _, d := range dirs {
		_ = os.Remove(hostfs.Path(root, d)) // fails, as wanted, when not empty
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fileSHA is the sha256 of the host's file, "" when it does not exist.
func fileSHA(root, path string) (string, error) {
	b, ok, err := readHost(root, path)
	if err != nil || !ok {
		return "", err
	}
	return sha(b), nil
}

func hostExists(root, path string) bool {
	_, err := os.Lstat(hostfs.Path(root, path))
	return err == nil
}

// missingDirs are the host's directories on the way to dir that do not
// exist, from the top down.
func missingDirs(root, dir string) []string {
	var out []string
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if hostExists(root, d) {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

// eventsKubeconfig is the kubeconfig the shim posts its Events with: the
// kubelet's own (its --kubeconfig), whose identity, system:node:NAME, the
// Node authorizer lets read only the pods bound to this node, and create
// events; it is the kubelet's to renew (its client certificate rotates).
// No token is copied onto the node. "" (Events off) when the kubelet has no
// kubeconfig (a standalone kubelet) or a relative one.
func eventsKubeconfig(kubeletArgv []string) string {
	p, ok := kubelet.FlagValue(kubeletArgv, "--kubeconfig")
	if !ok || !path.IsAbs(p) {
		return ""
	}
	return path.Clean(p)
}
