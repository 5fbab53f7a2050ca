package config

import (
	"flag"
	"slices"
	"testing"
)

func TestOptions(t *testing.T) {
	opts := Options(func(fs *flag.FlagSet) { fs.Bool("version", false, "print the version") })
	var flags, keys []string
	for _, o := range opts {
		flags = append(flags, o.Flag)
		if o.Key != "" {
			keys = append(keys, o.Key)
		}
	}
	want := []string{"config"}
	for _, k := range Keys() {
		want = append(want, flagName(k))
	}
	want = append(want, "version")
	if !slices.Equal(flags, want) {
		t.Errorf("flags %q, want %q", flags, want)
	}
	if !slices.Equal(keys, Keys()) {
		t.Errorf("keys %q, want %q", keys, Keys())
	}
	byFlag := map[string]Option{}
	for _, o := range opts {
		byFlag[o.Flag] = o
	}
	for _, tc := range []Option{
		{Flag: "config", Arg: "string", Default: DefaultPath},
		{Flag: "shutdown-timeout", Key: "shutdown_timeout", Arg: "duration", Default: "10s"},
		{Flag: "strict-targeting", Key: "strict_targeting", Default: "false"},
		{Flag: "metrics-address", Key: "metrics_address", Arg: "string", Default: ""},
		{Flag: "events-kubeconfig", Key: "events_kubeconfig", Arg: "string", Default: DefaultEventsKubeconfig},
		{Flag: "version", Default: "false"},
	} {
		got := byFlag[tc.Flag]
		got.Meaning = ""
		if got != tc {
			t.Errorf("%s: %+v, want %+v", tc.Flag, got, tc)
		}
	}
	if m := byFlag["state-dir"].Meaning; m == "" {
		t.Error("state-dir: no meaning")
	}
}
