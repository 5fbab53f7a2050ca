package preflight

import (
	"fmt"
	"io"
)

// Level is how a Result stands.
type Level int

const (
	OK Level = iota
	Warn
	Fail
)

func (l Level) String() string {
	switch l {
	case OK:
		return "ok"
	case Warn:
		return "warn"
	}
	return "fail"
}

// Result is one line of the check: what was seen, and what to do about
// it (nothing, for most ok lines).
type Result struct {
	Level Level
	What  string
	Do    string
}

func (r Result) String() string {
	if r.Do == "" {
		return fmt.Sprintf("%s: %s", r.Level, r.What)
	}
	return fmt.Sprintf("%s: %s — %s", r.Level, r.What, r.Do)
}

// Write prints the results, one a line, and returns the exit code: 1 when
// one of them failed, else 0.
func Write(w io.Writer, results []Result) int {
	code := 0
	for _, r := range results {
		fmt.Fprintln(w, r)
		if r.Level == Fail {
			code = 1
		}
	}
	return code
}
