package config

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		desc string
		toml string
		want func(*Config) // applied to Default(): the expected result
		errs []string      // substrings, one per expected error, in order
	}{
		{desc: "empty file means the defaults", toml: "", want: func(*Config) {}},
		{desc: "comments only", toml: "# nothing\n\n", want: func(*Config) {}},
		{
			desc: "every key",
			toml: `listen = "unix:///run/x/cri.sock"
runtime_endpoint = "/run/k3s/containerd/containerd.sock"
containerd_address = "unix:///run/k3s/containerd/containerd.sock"
containerd_namespace = "k8s.io"
state_dir = "/run/x"
strict_targeting = true
log_level = "debug"
log_format = "json"
log_journal = "off"
shutdown_timeout = "1m30s"
metrics_address = "127.0.0.1:9795"
`,
			want: func(c *Config) {
				c.Listen = "unix:///run/x/cri.sock"
				c.RuntimeEndpoint = "/run/k3s/containerd/containerd.sock"
				c.ContainerdAddress = "unix:///run/k3s/containerd/containerd.sock"
				c.StateDir = "/run/x"
				c.StrictTargeting = true
				c.LogLevel, c.LogFormat, c.LogJournal = "debug", "json", "off"
				c.ShutdownTimeout = Duration(90 * time.Second)
				c.MetricsAddress = "127.0.0.1:9795"
			},
		},
		{desc: "zero timeout is allowed", toml: `shutdown_timeout = "0s"`, want: func(c *Config) { c.ShutdownTimeout = 0 }},
		{
			desc: "unknown key, with its line",
			toml: "log_level = \"info\"\n\nlisten_address = \"/x\"\n",
			errs: []string{`cfg.toml:3: listen_address: unknown key (known: mode, listen, runtime_endpoint,`},
		},
		{
			desc: "unknown table",
			toml: "log_level = \"info\"\n[metrics]\naddress = \"x\"\n",
			errs: []string{`cfg.toml:2: metrics: unknown key`},
		},
		{
			desc: "wrong type",
			toml: "\nstrict_targeting = \"yes\"\n",
			errs: []string{`cfg.toml:2: strict_targeting: want a boolean (true or false), got a string`},
		},
		{
			desc: "string wanted",
			toml: "listen = 5\n",
			errs: []string{`cfg.toml:1: listen: want a string, got an integer`},
		},
		{
			desc: "duration as a bare number is refused, not taken as nanoseconds",
			toml: "log_level = \"info\"\nshutdown_timeout = 10\n",
			errs: []string{`cfg.toml:2: shutdown_timeout: want a duration string such as "10s", got an integer`},
		},
		{
			desc: "duration without a unit",
			toml: "shutdown_timeout = \"10\"\n",
			errs: []string{`cfg.toml:1: shutdown_timeout: "10" is not a duration`},
		},
		{
			desc: "negative timeout",
			toml: "\n\nshutdown_timeout = \"-5s\"\n",
			errs: []string{`cfg.toml:3: shutdown_timeout: -5s is negative`},
		},
		{
			desc: "bad enum, with every other bad value",
			toml: "log_format = \"xml\"\nlog_level = \"loud\"\nlisten = \"run/x.sock\"\nstate_dir = \"run\"\nmetrics_address = \"9795\"\n",
			errs: []string{
				`cfg.toml:1: log_format: "xml" is not a log format (want text or json)`,
				`cfg.toml:2: log_level: "loud" is not a log level`,
				`cfg.toml:3: listen: "run/x.sock": want unix:///absolute/path or /absolute/path`,
				`cfg.toml:4: state_dir: "run" is not an absolute path`,
				`cfg.toml:5: metrics_address: "9795": want host:port`,
			},
		},
		{
			desc: "runtime handlers: names and auto",
			toml: "runtime_handlers_without_join = \"auto, kata-qemu,runsc\"\n",
			want: func(c *Config) { c.NoJoinHandlers = "auto, kata-qemu,runsc" },
		},
		{desc: "runtime handlers: none", toml: "runtime_handlers_without_join = \"\"\n", want: func(c *Config) { c.NoJoinHandlers = "" }},
		{
			desc: "runtime handlers are DNS labels",
			toml: "runtime_handlers_without_join = \"auto,Kata/QEMU\"\n",
			errs: []string{`cfg.toml:1: runtime_handlers_without_join: "Kata/QEMU" is not a runtime handler name`},
		},
		{desc: "the plugin mode", toml: "mode = \"plugin\"\n", want: func(c *Config) { c.Mode = "plugin" }},
		{
			desc: "mode is proxy or plugin",
			toml: "mode = \"nri\"\n",
			errs: []string{`cfg.toml:1: mode: "nri" is not a mode (want proxy or plugin)`},
		},
		{
			desc: "the plugin mode targets through NRI only",
			toml: "mode = \"plugin\"\ntargeting_via = \"update\"\n",
			errs: []string{`cfg.toml:2: targeting_via: "update": the plugin mode targets through containerd's NRI only`},
		},
		{
			desc: "log_journal is auto or off",
			toml: "log_journal = \"on\"\n",
			errs: []string{`cfg.toml:1: log_journal: "on" is not a log_journal setting (want auto or off)`},
		},
		{
			desc: "unknown key and bad values together, in line order",
			toml: "log_format = \"xml\"\nshutdown_timeout = 10\nfoo = 1\n",
			errs: []string{
				`cfg.toml:1: log_format: "xml" is not a log format`,
				`cfg.toml:2: shutdown_timeout: want a duration string such as "10s", got an integer`,
				`cfg.toml:3: foo: unknown key`,
			},
		},
		{
			desc: "socket group with the socket inside the 0700 state dir",
			toml: "socket_group = \"crictl\"\n",
			errs: []string{`cfg.toml:1: socket_group: "crictl" cannot reach a socket inside state_dir /run/cri-nstarget`},
		},
		{
			desc: "socket group with the socket outside the state dir",
			toml: "socket_group = \"crictl\"\nlisten = \"unix:///run/cri-nstarget.sock\"\n",
			want: func(c *Config) { c.SocketGroup, c.Listen = "crictl", "unix:///run/cri-nstarget.sock" },
		},
		{
			desc: "state dir that JSON cannot carry",
			toml: "state_dir = \"/run/\\u00ff\"\n",
			want: func(c *Config) { c.StateDir = "/run/\u00ff" },
		},
		{
			desc: "duplicate key",
			toml: "log_level = \"info\"\nlog_level = \"debug\"\n",
			errs: []string{`cfg.toml:2: log_level: key log_level is already defined`},
		},
		{
			desc: "syntax error",
			toml: "log_level = \"info\"\nlog_format = \n",
			errs: []string{`cfg.toml:2:`},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Decode("cfg.toml", []byte(tc.toml))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("Decode = %+v, want errors %q", got, tc.errs)
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tc.errs) {
					t.Fatalf("Decode error:\n%v\nwant %d errors: %q", err, len(tc.errs), tc.errs)
				}
				for i, want := range tc.errs {
					if !strings.Contains(lines[i], want) {
						t.Errorf("error %d = %q, want it to contain %q", i, lines[i], want)
					}
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Errorf("error %v is not a *config.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := Default()
			tc.want(&want)
			if got != want {
				t.Errorf("Decode =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestDefaultRoundTrip(t *testing.T) {
	b, err := Default().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("default", b)
	if err != nil {
		t.Fatalf("decode the marshalled defaults: %v\n%s", err, b)
	}
	if got != Default() {
		t.Errorf("round trip = %+v, want %+v", got, Default())
	}
	for _, key := range Keys() {
		if !bytes.Contains(b, []byte("\n"+key+" = ")) {
			t.Errorf("marshalled defaults lack key %s:\n%s", key, b)
		}
	}
	// A non-default configuration survives the round trip too.
	c := Default()
	c.StrictTargeting, c.ShutdownTimeout, c.MetricsAddress = true, Duration(1500*time.Millisecond), "[::1]:0"
	b, _ = c.Marshal()
	if got, err := Decode("custom", b); err != nil || got != c {
		t.Errorf("round trip = %+v, %v; want %+v", got, err, c)
	}
}

// default.toml is what `make install` puts in /etc/cri-nstarget: it must be
// what `cri-nstarget config default` prints.
func TestDefaultFileIsCurrent(t *testing.T) {
	want, _ := Default().Marshal()
	got, err := os.ReadFile("default.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("config/default.toml is stale; regenerate it with `make config/default.toml`. want:\n%s", want)
	}
}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(file, []byte("log_level = \"debug\"\nstrict_targeting = true\nshutdown_timeout = \"3s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("\nlog_format = \"xml\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		args []string
		want func(*Config)
		err  string
	}{
		{desc: "no file, no flags: defaults", args: []string{"--config="}, want: func(*Config) {}},
		{
			desc: "file over defaults",
			args: []string{"--config", file},
			want: func(c *Config) {
				c.LogLevel, c.StrictTargeting, c.ShutdownTimeout = "debug", true, Duration(3*time.Second)
			},
		},
		{
			desc: "flags over file, whatever their order",
			args: []string{"--log-level", "warn", "--config", file, "--strict-targeting=false", "--metrics-address", "127.0.0.1:0"},
			want: func(c *Config) {
				c.LogLevel, c.StrictTargeting, c.ShutdownTimeout, c.MetricsAddress = "warn", false, Duration(3*time.Second), "127.0.0.1:0"
			},
		},
		{
			desc: "flags over defaults without a file",
			args: []string{"--config=", "--state-dir", "/run/y", "--shutdown-timeout", "250ms"},
			want: func(c *Config) { c.StateDir, c.ShutdownTimeout = "/run/y", Duration(250*time.Millisecond) },
		},
		{
			desc: "bare absolute --listen, as crictl and containerd take it",
			args: []string{"--config=", "--listen", "/run/x.sock", "--socket-group", "0"},
			want: func(c *Config) { c.Listen, c.SocketGroup = "/run/x.sock", "0" },
		},
		{desc: "bare socket inside the state dir with a group", args: []string{"--config=", "--listen", "/run/cri-nstarget/x.sock", "--socket-group", "0"}, err: "--socket-group: \"0\" cannot reach a socket inside state_dir"},
		{desc: "unix:// with a relative path", args: []string{"--config=", "--listen", "unix://run/x.sock"}, err: `--listen: "unix://run/x.sock": want unix:///absolute/path or /absolute/path`},
		{desc: "tcp --runtime-endpoint", args: []string{"--config=", "--runtime-endpoint", "tcp://127.0.0.1:1"}, err: `--runtime-endpoint: "tcp://127.0.0.1:1": want unix:///absolute/path or /absolute/path`},
		{desc: "missing explicit file", args: []string{"--config", filepath.Join(dir, "absent.toml")}, err: "absent.toml: no such file"},
		{desc: "bad file is an error even if a flag would fix it", args: []string{"--config", bad, "--log-format", "json"}, err: bad + `:2: log_format: "xml" is not a log format`},
		{desc: "bad flag value", args: []string{"--config=", "--log-format", "xml"}, err: `command line: --log-format: "xml" is not a log format`},
		{desc: "--log-journal off", args: []string{"--config=", "--log-journal", "off"}, want: func(c *Config) { c.LogJournal = "off" }},
		{desc: "bad --log-journal", args: []string{"--config=", "--log-journal", "yes"}, err: `command line: --log-journal: "yes" is not a log_journal setting`},
		{desc: "negative flag timeout", args: []string{"--config=", "--shutdown-timeout", "-1s"}, err: "--shutdown-timeout: -1s is negative"},
		{desc: "unparsable flag timeout", args: []string{"--config=", "--shutdown-timeout", "soon"}, err: `invalid value "soon" for flag -shutdown-timeout`},
		{desc: "unknown flag", args: []string{"--listen-address", "x"}, err: "flag provided but not defined"},
		{desc: "stray argument", args: []string{"--config=", "serve"}, err: `unexpected arguments: ["serve"]`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var out bytes.Buffer
			version := false
			got, err := Parse(tc.args, &out, func(fs *flag.FlagSet) { fs.BoolVar(&version, "version", false, "") })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) error = %v, want %q", tc.args, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v (output %s)", tc.args, err, out.String())
			}
			want := Default()
			tc.want(&want)
			if got != want {
				t.Errorf("Parse(%q) =\n%+v\nwant\n%+v", tc.args, got, want)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "config.toml")
	if c, err := Load(absent, false); err != nil || c != Default() {
		t.Errorf("Load(missing default file) = %+v, %v; want the defaults", c, err)
	}
	if _, err := Load(absent, true); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing explicit file) error = %v, want not exist", err)
	}
}

func TestEveryKeyIsAFlag(t *testing.T) {
	probe, path := Default(), ""
	fs := newFlagSet(&probe, &path, nil, nil)
	for _, key := range Keys() {
		if fs.Lookup(flagName(key)) == nil {
			t.Errorf("key %s has no flag --%s", key, flagName(key))
		}
	}
	if fs.Lookup("config") == nil {
		t.Error("no --config flag")
	}
}

func TestExtraFlags(t *testing.T) {
	version := false
	if _, err := Parse([]string{"--config=", "--version"}, new(bytes.Buffer), func(fs *flag.FlagSet) {
		fs.BoolVar(&version, "version", false, "print the version")
	}); err != nil || !version {
		t.Errorf("Parse --version: %v, version=%v", err, version)
	}
}

// A state dir that is not UTF-8 can only come from the command line (TOML
// strings are UTF-8); the pin paths under it could not go into a JSON spec.
func TestStateDirMustBeUTF8(t *testing.T) {
	_, err := Parse([]string{"--config=", "--state-dir", "/run/\xff"}, io.Discard, func(*flag.FlagSet) {})
	if err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("err = %v, want state_dir refused as not UTF-8", err)
	}
}
