package config

import (
	"flag"
	"io"
)

// Option is one flag of the command line as an operator reads it: the flag,
// the key of the file that sets the same (empty for a flag that is no
// setting, such as --config), its default and its meaning. Options takes
// them from the flag set that Parse uses, so that a reference made from them
// (docs/operations.md, the man page: make docs) cannot say other than the binary.
type Option struct {
	Flag    string // "state-dir"
	Key     string // "state_dir"; empty when no key of the file sets it
	Arg     string // the value's kind, as --help names it: "string", "duration"; "" for a boolean
	Default string // as the flag package has it: "10s", "false"; "" when empty
	Meaning string // the flag's usage: the comment tag of the setting
}

// Options lists --config, every setting in the order of Config, then the
// flags that extra defines (as Parse's extra does), by name.
func Options(extra func(*flag.FlagSet)) []Option {
	c, path := Default(), DefaultPath
	flags := newFlagSet(&c, &path, io.Discard, extra)
	keys, args := map[string]string{}, map[string]string{}
	order := []string{"config"}
	for _, f := range fields {
		keys[flagName(f.key)] = f.key
		args[flagName(f.key)] = [...]string{stringKind: "string", boolKind: "", durationKind: "duration"}[f.kind]
		order = append(order, flagName(f.key))
	}
	flags.VisitAll(func(f *flag.Flag) {
		if _, setting := keys[f.Name]; !setting && f.Name != "config" {
			order = append(order, f.Name)
		}
	})
	opts := make([]Option, 0, len(order))
	for _, name := range order {
		f := flags.Lookup(name)
		arg, usage := flag.UnquoteUsage(f)
		if a, setting := args[name]; setting {
			arg = a
		}
		opts = append(opts, Option{Flag: name, Key: keys[name], Arg: arg, Default: f.DefValue, Meaning: usage})
	}
	return opts
}
