// Package config is cri-nstarget's configuration: the defaults, the TOML file
// (by default /etc/cri-nstarget/config.toml) and the command-line flags, which
// override the file. Every setting is both a flag (--state-dir) and a key
// (state_dir).
//
// A file that cannot be used is an error naming the file, the line and the
// reason: a syntax error, an unknown key, a value of the wrong type, or a bad
// value (log_format = "xml", a negative shutdown_timeout). A missing default
// file is fine; a missing file given with --config is not.
package config
