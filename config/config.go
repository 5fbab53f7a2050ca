package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
	"github.com/sirupsen/logrus"
)

// DefaultPath is the configuration file read when --config is not given.
const DefaultPath = "/etc/cri-nstarget/config.toml"

// DefaultEventsKubeconfig is the kubelet's kubeconfig where kubeadm (and
// most installers) put it: the identity that posts the shim's Events.
const DefaultEventsKubeconfig = "/etc/kubernetes/kubelet.conf"

// Config is every setting of cri-nstarget. The toml tag is the key in the
// file; the flag is the key with '-' for '_'; the comment tag is the flag's
// usage and the comment above the key in `cri-nstarget config default`.
type Config struct {
	Mode                string   `toml:"mode" comment:"proxy: a CRI proxy in front of containerd, serving listen to the kubelet (the default); plugin (experimental): no CRI socket, the kubelet talks to containerd directly, and cri-nstarget is an NRI plugin of it (containerd 2.2 and later), pinning a TARGET container's namespace in containerd's own create; while it is not connected, containerd creates as it would without it (docs/operations.md)"`
	Listen              string   `toml:"listen" comment:"CRI socket served to kubelet and crictl (unix:///absolute/path, or /absolute/path); mode 0660; a socket left by a crash is replaced, one another process serves is an error"`
	RuntimeEndpoint     string   `toml:"runtime_endpoint" comment:"backend CRI endpoint (containerd's CRI plugin)"`
	ContainerdAddress   string   `toml:"containerd_address" comment:"containerd API socket, for container specs and task pids"`
	ContainerdNamespace string   `toml:"containerd_namespace" comment:"containerd namespace of CRI objects"`
	StateDir            string   `toml:"state_dir" comment:"state directory, mode 0700: namespace pins live in <state_dir>/pins, records of creates in flight in <state_dir>/intents; keep it on tmpfs"`
	StrictTargeting     bool     `toml:"strict_targeting" comment:"fail CreateContainer/StartContainer instead of falling back to the pod's namespaces"`
	LogLevel            string   `toml:"log_level" comment:"log level: trace, debug, info, warn, error"`
	LogFormat           string   `toml:"log_format" comment:"log format on stderr: text or json"`
	LogJournal          string   `toml:"log_journal" comment:"auto: when stderr is journald's stream (under systemd), send log entries to the journal with their priority and fields (an entry it refuses goes to stderr); off: always stderr"`
	ShutdownTimeout     Duration `toml:"shutdown_timeout" comment:"how long in-flight calls may run after SIGTERM (a duration such as \"10s\")"`
	MetricsAddress      string   `toml:"metrics_address" comment:"host:port serving Prometheus /metrics and /healthz, e.g. \"127.0.0.1:9795\"; empty: off"`
	SocketGroup         string   `toml:"socket_group" comment:"group (name or gid) given the CRI socket, so its members can use crictl; the socket must then be outside state_dir (mode 0700); empty: root only"`
	TargetingVia        string   `toml:"targeting_via" comment:"how a targeted container's spec is written: auto (through containerd's NRI where it adjusts namespaces, containerd 2.2+; else through containerd's API after CreateContainer), nri (NRI only: TARGET creates fail while it is not usable) or update"`
	NRISocket           string   `toml:"nri_socket" comment:"containerd's NRI socket (targeting_via auto or nri)"`
	EventsKubeconfig    string   `toml:"events_kubeconfig" comment:"kubeconfig whose identity posts an Event on the pod of every container that asks for TARGET, saying whether it joined its target (kubectl describe pod shows it); by default the kubelet's own, read when the first event is due and again when it changes; empty: no events"`
	NodeName            string   `toml:"node_name" comment:"the node's name in the cluster, as the Events give it (their source; the Node of the plugin mode's PluginUnsupported); empty: the node events_kubeconfig's identity names (system:node:NAME), else the host's name"`
	NoJoinHandlers      string   `toml:"runtime_handlers_without_join" comment:"runtime handlers (a RuntimeClass's handler) whose runtime does not join the namespace paths a spec names, as VM and user-space-kernel runtimes (Kata, gVisor) do not: a TARGET create in their pods falls back before anything is made (strict: refused). Comma-separated names; auto: those whose containerd runtime type is not runc's, as containerd's config says; \"auto,NAME\" adds NAME; empty: none. Handlers whose containers were seen starting outside the namespace their spec named are added, whatever this says"`
}

// Default is the configuration without a file or flags.
func Default() Config {
	return Config{
		Mode:                "proxy",
		Listen:              "unix:///run/cri-nstarget/cri.sock",
		RuntimeEndpoint:     "unix:///run/containerd/containerd.sock",
		ContainerdAddress:   "/run/containerd/containerd.sock",
		ContainerdNamespace: "k8s.io",
		StateDir:            "/run/cri-nstarget",
		LogLevel:            "info",
		LogFormat:           "text",
		LogJournal:          "auto",
		ShutdownTimeout:     Duration(10 * time.Second),
		TargetingVia:        "auto",
		NRISocket:           "/var/run/nri/nri.sock",
		EventsKubeconfig:    DefaultEventsKubeconfig,
		NoJoinHandlers:      "auto",
	}
}

// header opens the TOML that Marshal writes.
const header = `# cri-nstarget configuration. Every key is also a flag (state_dir: --state-dir);
# flags given on the command line override this file.
`

// Marshal renders c as a commented TOML file that Decode reads back as c.
func (c Config) Marshal() ([]byte, error) {
	b, err := toml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode configuration: %w", err)
	}
	return append([]byte(header+"\n"), b...), nil
}

// Error is one unusable setting: where it came from (a file and line, or a
// command-line flag) and why.
type Error struct {
	Source string // the file, or "command line"
	Line   int    // in Source; 0 when not known or on the command line
	Key    string // "log_format", or "--log-format" on the command line
	Reason string
}

func (e *Error) Error() string {
	at := e.Source
	if e.Line > 0 {
		at += ":" + strconv.Itoa(e.Line)
	}
	if e.Key == "" {
		return at + ": " + e.Reason
	}
	return at + ": " + e.Key + ": " + e.Reason
}

// Load reads the file at path over the defaults. A missing file is an error
// only when explicit (given with --config); otherwise it means the defaults.
func Load(path string, explicit bool) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return Default(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("config file: %w", err)
	}
	return Decode(path, data)
}

// Decode reads a TOML configuration over the defaults; source names it in
// errors. Every problem found is reported, each with its line.
func Decode(source string, data []byte) (Config, error) {
	c := Default()
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var errs []error
	if err := dec.Decode(&c); err != nil {
		// Unknown keys are reported after a complete decode: go on, to
		// report the known keys' problems too. Anything else stops here.
		var strict *toml.StrictMissingError
		if !errors.As(err, &strict) {
			return Config{}, decodeError(source, err)
		}
		errs = append(errs, decodeError(source, err))
	}
	keys := locate(data)
	for _, f := range fields {
		k, ok := keys[f.key]
		if ok && f.kind == durationKind && k.kind != unstable.String {
			errs = append(errs, &Error{Source: source, Line: k.line, Key: f.key,
				Reason: fmt.Sprintf("want %s, got %s", f.want(), article(k.kind.String()))})
		}
	}
	for _, p := range c.problems() {
		errs = append(errs, &Error{Source: source, Line: keys[p.key].line, Key: p.key, Reason: p.reason})
	}
	if len(errs) > 0 {
		return Config{}, byLine(errs)
	}
	return c, nil
}

// byLine joins errs, *Errors (also joined ones) in the order of their lines.
func byLine(errs []error) error {
	var flat []error
	for _, err := range errs {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			flat = append(flat, j.Unwrap()...)
		} else {
			flat = append(flat, err)
		}
	}
	line := func(err error) int {
		if e, ok := err.(*Error); ok {
			return e.Line
		}
		return 0
	}
	slices.SortStableFunc(flat, func(a, b error) int { return line(a) - line(b) })
	return errors.Join(flat...)
}

// Parse reads the configuration of a command line: the file named by
// --config (DefaultPath when not given; empty for none) over the defaults,
// then the flags given on the command line over the file. extra, if not nil,
// defines the caller's own flags (such as --version) on the same flag set.
// Usage and flag errors are written to out.
func Parse(args []string, out io.Writer, extra func(*flag.FlagSet)) (Config, error) {
	probe := Default()
	path := DefaultPath
	flags := newFlagSet(&probe, &path, out, extra)
	if err := flags.Parse(args); err != nil {
		return Config{}, usageError{err}
	}
	if flags.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %q", flags.Args())
	}
	explicit := false
	flags.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
	c := Default()
	if path != "" {
		var err error
		if c, err = Load(path, explicit); err != nil {
			return Config{}, err
		}
	}
	// The same arguments again, over the file: only the flags given change.
	if err := newFlagSet(&c, new(string), io.Discard, extra).Parse(args); err != nil {
		return Config{}, err
	}
	var errs []error
	for _, p := range c.problems() {
		errs = append(errs, &Error{Source: "command line", Key: "--" + flagName(p.key), Reason: p.reason})
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// usageError is a command-line error that the flag package has already
// written out, with the usage (or the usage asked for with -h).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// IsUsage reports whether Parse has already written err out, with the usage.
func IsUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

func newFlagSet(c *Config, path *string, out io.Writer, extra func(*flag.FlagSet)) *flag.FlagSet {
	flags := flag.NewFlagSet("cri-nstarget", flag.ContinueOnError)
	flags.SetOutput(out)
	flags.StringVar(path, "config", *path, "configuration file (TOML); flags override it; the default file may be missing (the defaults then), a file given here must exist; empty: none")
	v := reflect.ValueOf(c).Elem()
	for _, f := range fields {
		p := v.Field(f.index).Addr().Interface()
		switch f.kind {
		case stringKind:
			flags.StringVar(p.(*string), flagName(f.key), *p.(*string), f.usage)
		case boolKind:
			flags.BoolVar(p.(*bool), flagName(f.key), *p.(*bool), f.usage)
		case durationKind:
			flags.Var(p.(*Duration), flagName(f.key), f.usage)
		}
	}
	if extra != nil {
		extra(flags)
	}
	return flags
}

func flagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// problem is a setting whose value is of the right type but unusable.
type problem struct{ key, reason string }

// problems checks the values, in the order of the fields.
func (c Config) problems() []problem {
	var ps []problem
	add := func(key string, err error) {
		if err != nil {
			ps = append(ps, problem{key, err.Error()})
		}
	}
	add("listen", unixPath(c.Listen))
	add("runtime_endpoint", unixPath(c.RuntimeEndpoint))
	add("containerd_address", unixPath(c.ContainerdAddress))
	if c.ContainerdNamespace == "" || strings.ContainsAny(c.ContainerdNamespace, "/ \x00") {
		add("containerd_namespace", fmt.Errorf("%q is not a containerd namespace name (containerd's CRI uses \"k8s.io\")", c.ContainerdNamespace))
	}
	if !filepath.IsAbs(c.StateDir) {
		add("state_dir", fmt.Errorf("%q is not an absolute path", c.StateDir))
	} else if !utf8.ValidString(c.StateDir) {
		add("state_dir", fmt.Errorf("%q is not valid UTF-8 (pin paths go into the container's OCI spec, which is JSON)", c.StateDir))
	}
	if _, err := logrus.ParseLevel(c.LogLevel); err != nil {
		add("log_level", fmt.Errorf("%q is not a log level (want trace, debug, info, warn or error)", c.LogLevel))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		add("log_format", fmt.Errorf("%q is not a log format (want text or json)", c.LogFormat))
	}
	if c.LogJournal != "auto" && c.LogJournal != "off" {
		add("log_journal", fmt.Errorf("%q is not a log_journal setting (want auto or off)", c.LogJournal))
	}
	if c.ShutdownTimeout < 0 {
		add("shutdown_timeout", fmt.Errorf("%s is negative (want a duration of 0s or more)", c.ShutdownTimeout))
	}
	if c.MetricsAddress != "" {
		add("metrics_address", hostPort(c.MetricsAddress))
	}
	if c.SocketGroup != "" {
		sock := filepath.Clean(strings.TrimPrefix(c.Listen, "unix://"))
		if dir := filepath.Clean(c.StateDir); strings.HasPrefix(sock, dir+"/") {
			add("socket_group", fmt.Errorf("%q cannot reach a socket inside state_dir %s, which is mode 0700: "+
				"put the socket outside it, e.g. listen = \"unix:///run/cri-nstarget.sock\"", c.SocketGroup, dir))
		}
	}
	c.targetingProblems(add)
	if c.EventsKubeconfig != "" && !filepath.IsAbs(c.EventsKubeconfig) {
		add("events_kubeconfig", fmt.Errorf("%q is not an absolute path (empty: no events)", c.EventsKubeconfig))
	}
	for _, n := range strings.Split(c.NoJoinHandlers, ",") {
		if n = strings.TrimSpace(n); n != "" && n != "auto" && !handlerName.MatchString(n) {
			add("runtime_handlers_without_join", fmt.Errorf("%q is not a runtime handler name (a DNS label, as a RuntimeClass's handler: lowercase letters, digits and '-', at most 63), nor auto", n))
		}
	}
	return ps
}

// targetingProblems checks the mode and how targeting goes (add takes
// each problem).
func (c Config) targetingProblems(add func(key string, err error)) {
	if c.Mode != "proxy" && c.Mode != "plugin" {
		add("mode", fmt.Errorf("%q is not a mode (want proxy or plugin)", c.Mode))
	}
	switch {
	case c.TargetingVia != "auto" && c.TargetingVia != "nri" && c.TargetingVia != "update":
		add("targeting_via", fmt.Errorf("%q is not a targeting path (want auto, nri or update)", c.TargetingVia))
	case c.Mode == "plugin" && c.TargetingVia == "update":
		add("targeting_via", fmt.Errorf("%q: the plugin mode targets through containerd's NRI only (want auto or nri, or mode = \"proxy\")", c.TargetingVia))
	}
	if c.TargetingVia != "update" || c.Mode == "plugin" {
		add("nri_socket", unixPath(c.NRISocket))
	}
}

// unixPath accepts "unix:///absolute/path" and, as crictl and containerd
// do, a bare "/absolute/path" (server.SocketPath applies the same rule).
func unixPath(endpoint string) error {
	if path, _ := strings.CutPrefix(endpoint, "unix://"); !filepath.IsAbs(path) {
		return fmt.Errorf("%q: want unix:///absolute/path or /absolute/path", endpoint)
	}
	return nil
}

func hostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n uint64
		if n, err = strconv.ParseUint(port, 10, 16); err == nil && (n > 0 || port == "0") {
			return nil
		}
	}
	return fmt.Errorf("%q: want host:port, such as 127.0.0.1:9795", addr)
}

// Duration is a time.Duration written as a string ("10s", "1m30s") in the
// file and on the command line.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as a duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (want a number with a unit, such as \"10s\")", b)
	}
	*d = Duration(v)
	return nil
}

// Set makes *Duration a flag.Value.
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// field is one setting of Config, as reflection sees it.
type field struct {
	index int
	key   string
	usage string
	kind  int
}

const (
	stringKind = iota
	boolKind
	durationKind
)

func (f field) want() string {
	switch f.kind {
	case boolKind:
		return "a boolean (true or false)"
	case durationKind:
		return `a duration string such as "10s"`
	}
	return "a string"
}

var fields = func() []field {
	var fs []field
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		sf := t.Field(i)
		f := field{index: i, key: sf.Tag.Get("toml"), usage: sf.Tag.Get("comment")}
		switch sf.Type {
		case reflect.TypeFor[string]():
			f.kind = stringKind
		case reflect.TypeFor[bool]():
			f.kind = boolKind
		case reflect.TypeFor[Duration]():
			f.kind = durationKind
		default:
			panic("config: no flag for field " + sf.Name)
		}
		fs = append(fs, f)
	}
	return fs
}()

// Keys lists the keys of the file, in order.
func Keys() []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// handlerName is a RuntimeClass handler: a DNS label (RFC 1123).
var handlerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

var mismatch = regexp.MustCompile(`cannot decode TOML (\w+) into`)

// decodeError turns the TOML library's errors into Errors with lines.
func decodeError(source string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		errs := make([]error, 0, len(strict.Errors))
		for _, e := range strict.Errors {
			line, _ := e.Position()
			errs = append(errs, &Error{Source: source, Line: line, Key: strings.Join(e.Key(), "."),
				Reason: "unknown key (known: " + strings.Join(Keys(), ", ") + ")"})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		key := strings.Join(de.Key(), ".")
		reason := strings.TrimPrefix(de.Error(), "toml: ")
		if m := mismatch.FindStringSubmatch(reason); m != nil {
			for _, f := range fields {
				if f.key == key {
					reason = fmt.Sprintf("want %s, got %s", f.want(), article(m[1]))
				}
			}
		}
		return &Error{Source: source, Line: line, Key: key, Reason: reason}
	}
	return fmt.Errorf("%s: %w", source, err)
}

// article names a TOML kind ("Integer", "LocalDate") with its article.
func article(kind string) string {
	s := strings.ToLower(kind)
	if strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// keyInfo is where a top-level key is set in a file, and the TOML kind of
// its value.
type keyInfo struct {
	line int
	kind unstable.Kind
}

// locate finds the top-level keys of a document that parses (Decode has
// checked it).
func locate(data []byte) map[string]keyInfo {
	keys := map[string]keyInfo{}
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind == unstable.Table || e.Kind == unstable.ArrayTable {
			break // Config has no tables: Decode refused any
		}
		if e.Kind != unstable.KeyValue {
			continue
		}
		it := e.Key()
		var parts []string
		var first *unstable.Node
		for it.Next() {
			if first == nil {
				first = it.Node()
			}
			parts = append(parts, string(it.Node().Data))
		}
		if first == nil {
			continue
		}
		keys[strings.Join(parts, ".")] = keyInfo{line: p.Shape(first.Raw).Start.Line, kind: e.Value().Kind}
	}
	return keys
}
