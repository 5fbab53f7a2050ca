package main

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
)

// syslogIdentifier is the journal's SYSLOG_IDENTIFIER of the shim's entries
// (journalctl -t cri-nstarget), as journald gives the lines of its stream.
const syslogIdentifier = "cri-nstarget"

// newLogger is the shim's log: stderr in format (text or json); or, with
// journalMode "auto" when stderr is journald's stream and the journal's
// socket is there, the journal, with each entry's priority and fields.
func newLogger(level, format, journalMode string) (*logrus.Entry, error) {
	l := logrus.New()
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	l.SetLevel(lvl)
	switch format {
	case "text":
		l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		l.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	switch journalMode {
	case "auto":
		if stderrIsJournal() && journal.Enabled() {
			sendToJournal(l, journal.Send)
		}
	case "off":
	default:
		return nil, fmt.Errorf("--log-journal %q: want auto or off", journalMode)
	}
	return logrus.NewEntry(l), nil
}

// stderrIsJournal reports whether stderr is journald's stream: JOURNAL_STREAM
// names its device and inode (systemd.exec(5)). A stderr redirected to a file
// or a terminal by the unit or by hand, which inherits JOURNAL_STREAM all the
// same, is not.
func stderrIsJournal() bool {
	is, err := journal.StderrIsJournalStream()
	return err == nil && is
}

// sendFunc sends one entry to the journal: journal.Send.
type sendFunc func(message string, priority journal.Priority, fields map[string]string) error

// sendToJournal makes l send its entries through send instead of writing
// them to its output; an entry that send refuses is written there as before,
// in l's format.
func sendToJournal(l *logrus.Logger, send sendFunc) {
	l.AddHook(&journalHook{send: send, fallback: l.Formatter, out: l.Out})
	l.SetFormatter(discard{})
	l.SetOutput(io.Discard)
}

// journalHook sends each entry through journald's native protocol, and
// writes those it cannot send to out in the fallback format (journald gone:
// its stream, stderr, may still be read, or be read again after a restart).
type journalHook struct {
	send     sendFunc
	fallback logrus.Formatter
	out      io.Writer

	mu      sync.Mutex // serializes the writes to out; guards failing
	failing bool       // the last send failed, and out was told why
}

func (h *journalHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h *journalHook) Fire(e *logrus.Entry) error {
	err := h.send(e.Message, priority(e.Level), journalFields(e.Data))
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.failing = false
		return nil
	}
	if !h.failing {
		h.failing = true
		note := logrus.NewEntry(e.Logger).WithError(err)
		note.Time, note.Level, note.Message = e.Time, logrus.WarnLevel, "the journal refused a log entry: writing them to stderr until it takes them again"
		if err := h.write(note); err != nil {
			return err
		}
	}
	return h.write(e)
}

// write writes e to out in the fallback format.
func (h *journalHook) write(e *logrus.Entry) error {
	b, err := h.fallback.Format(e)
	if err != nil {
		return err
	}
	_, err = h.out.Write(b)
	return err
}

// priority is the syslog priority of a logrus level, as logrus's own syslog
// hook maps them: panic is crit, not emerg, which journald sends to every
// terminal with wall (ForwardToWall=), and trace is debug.
func priority(l logrus.Level) journal.Priority {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel:
		return journal.PriCrit
	case logrus.ErrorLevel:
		return journal.PriErr
	case logrus.WarnLevel:
		return journal.PriWarning
	case logrus.InfoLevel:
		return journal.PriInfo
	}
	return journal.PriDebug
}

// journalFields renders an entry's fields for the journal, each value as
// text (%v: an error's Error()), with SYSLOG_IDENTIFIER.
func journalFields(data logrus.Fields) map[string]string {
	fields := make(map[string]string, len(data)+1)
	for k, v := range data {
		fields[fieldName(k)] = fmt.Sprint(v)
	}
	fields["SYSLOG_IDENTIFIER"] = syslogIdentifier
	return fields
}

// fieldName is the journal's name of a logrus field: upper case, any
// character other than A-Z, 0-9 and '_' turned into '_', at most 64
// characters. A name that would not start with a letter (journald refuses
// it; a leading '_' marks the fields journald itself sets), or that would be
// one of the fields the hook sets itself, gets the prefix FIELD_.
func fieldName(key string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_':
			return r
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		}
		return '_'
	}, key)
	switch {
	case name == "", name[0] == '_':
		name = "FIELD" + name
	case '0' <= name[0] && name[0] <= '9', name == "MESSAGE", name == "PRIORITY", name == "SYSLOG_IDENTIFIER":
		name = "FIELD_" + name
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// discard is the formatter of a logger whose output is discarded.
type discard struct{}

func (discard) Format(*logrus.Entry) ([]byte, error) { return nil, nil }

// Compile-time checks.
var (
	_ logrus.Hook = (*journalHook)(nil)
	_ sendFunc    = journal.Send
)
