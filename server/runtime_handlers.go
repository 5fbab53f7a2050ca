package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// HandlersAuto in Options.HandlersWithoutJoin: the handlers whose
// containerd runtime type is not runc's cannot join namespace paths.
const HandlersAuto = "auto"

// runcTypes are the containerd runtime types that run runc (or a runtime
// with its command line, such as crun, as the runc shim's BinaryName): they
// join the namespace paths a spec names.
var runcTypes = []string{"io.containerd.runc.v2", "io.containerd.runc.v1", "io.containerd.runtime.v1.linux"}

// configRetry is how often containerd's config is asked for again while it
// has not answered, or names a handler it did not list.
const configRetry = 10 * time.Second

// handlers knows each pod's runtime handler (the RuntimeClass handler the
// kubelet gave RunPodSandbox) and, per handler, whether its runtime joins
// the namespace paths a spec names. VM and user-space-kernel runtimes
// (Kata, gVisor) run the pod in a kernel of their own: a spec pointed at a
// pin of the host's is ignored, and the container starts in a namespace of
// its own. A handler cannot join when the configuration lists it
// (runtime_handlers_without_join), when "auto" is configured and
// containerd's config gives it a runtime type that is not runc's, or when
// verification saw one of its containers start outside the namespace its
// spec named (learn: kept in the state dir, across restarts of the shim).
//
// The pods' handlers are learnt from RunPodSandbox (ran) and, after a
// restart, from the backend (rebuild: ListPodSandbox; of: PodSandboxStatus
// for a pod not yet known). Its state is guarded by mu; no call is made
// holding it.
type handlers struct {
	cri    handlersCRI
	log    *logrus.Entry
	auto   bool            // configured "auto"
	listed map[string]bool // configured by name
	file   string          // where what verification saw is kept; "": nowhere

	// mu guards the rest; a leaf.
	mu       sync.Mutex
	pods     map[string]string // pod sandbox id -> its handler as asked for ("": the default)
	runtimes map[string]string // handler -> containerd runtime type (nil: containerd not read yet)
	defName  string            // containerd's default runtime name
	askedAt  time.Time         // when containerd's config was last asked for
	seen     map[string]string // handler -> what verification saw of it
}

// newHandlers is the table for the configured list (comma-separated names,
// HandlersAuto among them or not), with what verification saw before,
// kept in file.
func newHandlers(cri handlersCRI, log *logrus.Entry, configured, file string) *handlers {
	h := &handlers{cri: cri, log: log, listed: map[string]bool{}, file: file, pods: map[string]string{}, seen: map[string]string{}}
	for _, n := range strings.Split(configured, ",") {
		switch n = strings.TrimSpace(n); n {
		case "":
		case HandlersAuto:
			h.auto = true
		default:
			h.listed[n] = true
		}
	}
	if file != "" {
		if b, err := os.ReadFile(file); err == nil {
			if err := json.Unmarshal(b, &h.seen); err != nil {
				log.WithError(err).WithField("file", file).Warn("runtime handlers seen not joining: unreadable; starting afresh")
				h.seen = map[string]string{}
			}
		}
	}
	return h
}

// ran records the handler a RunPodSandbox gave the pod sandbox id.
func (h *handlers) ran(sandbox, handler string) {
	if h == nil || sandbox == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[sandbox] = handler
}

// removed forgets pod sandbox id.
func (h *handlers) removed(sandbox string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pods, sandbox)
}

// rebuild learns the handlers of every pod the backend has (after a
// restart of the shim), and reads containerd's runtimes.
func (h *handlers) rebuild(ctx context.Context) error {
	if h == nil {
		return nil
	}
	resp, err := h.cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("runtime handlers of the pods: %w", err)
	}
	h.mu.Lock()
	for _, p := range resp.GetItems() {
		h.pods[p.GetId()] = p.GetRuntimeHandler()
	}
	h.mu.Unlock()
	h.readConfig(ctx, true, "")
	return nil
}

// of is the runtime handler of pod sandbox id (full), named as containerd
// names it ("" becomes containerd's default runtime's name, when known),
// and whether it is known: a pod not yet known is asked for
// (PodSandboxStatus).
func (h *handlers) of(ctx context.Context, sandbox string) (string, bool) {
	if h == nil {
		return "", false
	}
	h.mu.Lock()
	handler, ok := h.pods[sandbox]
	h.mu.Unlock()
	if !ok {
		resp, err := h.cri.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandbox})
		if err != nil {
			h.log.WithError(err).WithField("sandbox", sandbox).Debug("runtime handler of the pod: not known")
			return "", false
		}
		handler = resp.GetStatus().GetRuntimeHandler()
		h.ran(sandbox, handler)
	}
	h.readConfig(ctx, false, handler)
	h.mu.Lock()
	defer h.mu.Unlock()
	if handler == "" {
		handler = h.defName
	}
	return handler, handler != ""
}

// cannot says why the runtime of handler cannot join namespace paths, ""
// when nothing says so.
func (h *handlers) cannot(handler string) string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch typ, known := h.runtimes[handler]; {
	case h.listed[handler]:
		return fmt.Sprintf("runtime handler %s does not join namespace paths: runtime_handlers_without_join lists it", handler)
	case h.seen[handler] != "":
		return fmt.Sprintf("runtime handler %s does not join namespace paths: %s", handler, h.seen[handler])
	case h.auto && known && !slices.Contains(runcTypes, typ):
		return fmt.Sprintf("runtime handler %s does not join namespace paths: its containerd runtime type %s is not runc's (runtime_handlers_without_join = auto)", handler, typ)
	}
	return ""
}

// learn records that verification saw a container of handler start outside
// the namespace its spec named (why), so that the next TARGET creates in
// its pods fall back before anything is made. It is kept in the state dir.
func (h *handlers) learn(handler, why string) {
	if h == nil || handler == "" {
		return
	}
	h.mu.Lock()
	_, had := h.seen[handler]
	h.seen[handler] = why
	seen := maps.Clone(h.seen)
	h.mu.Unlock()
	if had {
		return
	}
	h.log.WithFields(logrus.Fields{"runtime_handler": handler, "seen": why}).
		Warn("a runtime handler does not join namespace paths: TARGET creates in its pods fall back before anything is made from now on")
	if err := h.keep(seen); err != nil {
		h.log.WithError(err).Warn("keep the runtime handlers seen not joining in the state dir; they are known until the shim restarts")
	}
}

// keep writes seen to the state dir, whole (a rename).
func (h *handlers) keep(seen map[string]string) error {
	if h.file == "" {
		return nil
	}
	b, err := json.Marshal(seen)
	if err != nil {
		return err
	}
	tmp := h.file + ".tmp"
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, h.file)
}

// readConfig asks containerd for its runtimes (CRI Status, verbose: its
// config): with force, now; else when it has not answered yet, or did not
// list handler (containerd restarted with another config), and was last
// asked configRetry ago or more.
func (h *handlers) readConfig(ctx context.Context, force bool, handler string) {
	h.mu.Lock()
	_, listed := h.runtimes[handler]
	due := force || time.Since(h.askedAt) >= configRetry && (h.runtimes == nil || handler != "" && !listed)
	if due {
		h.askedAt = time.Now()
	}
	h.mu.Unlock()
	if !due {
		return
	}
	resp, err := h.cri.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		h.log.WithError(err).Debug("containerd's runtimes: Status did not answer; asked again later")
		return
	}
	runtimes, def, err := runtimesOf(resp.GetInfo())
	if err != nil {
		h.log.WithError(err).Warn("containerd's Status does not say its runtimes: no runtime handler is known unable to join namespace paths but those runtime_handlers_without_join names and those verification sees")
		runtimes = map[string]string{}
	}
	h.mu.Lock()
	h.runtimes, h.defName = runtimes, def
	h.mu.Unlock()
	h.log.WithFields(logrus.Fields{"runtimes": runtimes, "default": def}).Debug("containerd's runtimes")
}

// errNoRuntimes: containerd's Status info does not carry its runtimes.
var errNoRuntimes = errors.New("no runtimes in containerd's config")

// runtimesOf reads the runtimes (handler name -> runtime type) and the
// default runtime's name from containerd's verbose CRI Status info: its
// config, as JSON, under "config" (containerd 1.7 and 2.x alike:
// {"containerd": {"defaultRuntimeName": ..., "runtimes": {NAME:
// {"runtimeType": ...}}}}).
func runtimesOf(info map[string]string) (map[string]string, string, error) {
	raw, ok := info["config"]
	if !ok {
		return nil, "", fmt.Errorf("%w: Status answered no config", errNoRuntimes)
	}
	var cfg struct {
		Containerd struct {
			DefaultRuntimeName string `json:"defaultRuntimeName"`
			Runtimes           map[string]struct {
				RuntimeType string `json:"runtimeType"`
			} `json:"runtimes"`
		} `json:"containerd"`
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return nil, "", fmt.Errorf("containerd's config: %w", err)
	}
	if len(cfg.Containerd.Runtimes) == 0 {
		return nil, "", errNoRuntimes
	}
	out := make(map[string]string, len(cfg.Containerd.Runtimes))
	for name, r := range cfg.Containerd.Runtimes {
		out[name] = r.RuntimeType
	}
	return out, cfg.Containerd.DefaultRuntimeName, nil
}
