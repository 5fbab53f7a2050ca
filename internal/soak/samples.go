package soak

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// sample reads the shim's RSS and fds from /proc and its goroutines from
// its metrics endpoint (go_goroutines).
func (n *node) sample(at time.Duration) (Sample, error) {
	pid := n.shimPID()
	if pid == 0 {
		return Sample{}, fmt.Errorf("no shim running")
	}
	s := Sample{At: at, PID: pid, Goroutines: -1}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			s.RSS = kb << 10
		}
	}
	f.Close()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = len(fds)
	if addr := harness.MetricsAddr(n.shim.LogPath()); addr != "" {
		c := http.Client{Timeout: 10 * time.Second}
		if resp, err := c.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
					s.Goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
				}
			}
		}
	}
	return s, nil
}
