package soak

import (
	"bufio"
	"os"
	"regexp"
	"strings"
)

// codeRE is the gRPC code of an error the kubelet logs from a runtime call
// (cri-client: `"CreateContainer in sandbox from runtime service failed"
// err="rpc error: code = FailedPrecondition desc = ..."`).
var codeRE = regexp.MustCompile(`rpc error: code = (\w+) desc = `)

// kubeletCode finds, in the kubelet's log, the gRPC code of the runtime
// answer whose message the kubelet put in a pod's status (it keeps only the
// message there): the code of the last logged error whose description
// begins as msg does. "" when none is found.
func kubeletCode(logPath, msg string) string {
	key := messageKey(msg)
	if key == "" {
		return ""
	}
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	code := ""
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		l := s.Text()
		if !strings.Contains(l, key) {
			continue
		}
		if m := codeRE.FindStringSubmatch(l); m != nil {
			code = m[1]
		}
	}
	return code
}

// messageKey is the start of msg as it appears in a quoted log value: up
// to the first character klog would escape, at most 60 bytes; "" when
// that is too short to tell one message from another.
func messageKey(msg string) string {
	if i := strings.IndexAny(msg, "\"\\\n\t"); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 60 {
		msg = msg[:60]
	}
	if len(msg) < 12 {
		return ""
	}
	return msg
}

// kubeletStartCode is the gRPC code of the failed StartContainer of
// container id, as the kubelet logged it (cri-client: `"StartContainer from
// runtime service failed" err="rpc error: code = ..." containerID="ID"`);
// "" when the kubelet logged none. The pod's status shows, once the
// container is seen exited, the runtime's own reason (StartError), not the
// answer the kubelet had.
func kubeletStartCode(logPath, id string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	code := ""
	want := `containerID="` + id + `"`
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		l := s.Text()
		if !strings.Contains(l, "StartContainer from runtime service failed") || !strings.Contains(l, want) {
			continue
		}
		if m := codeRE.FindStringSubmatch(l); m != nil {
			code = m[1]
		}
	}
	return code
}
