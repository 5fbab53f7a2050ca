package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
)

func TestFieldName(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`) // journald's rule for fields a client may set
	for _, tc := range []struct{ key, want string }{
		{"container", "CONTAINER"},
		{"reason_kind", "REASON_KIND"},
		{"resolve_us", "RESOLVE_US"},
		{"grpc.code", "GRPC_CODE"},
		{"content-type", "CONTENT_TYPE"},
		{"pid ns", "PID_NS"},
		{"größe", "GR__E"},
		{"_private", "FIELD_PRIVATE"},
		{"__x", "FIELD__X"},
		{"1st", "FIELD_1ST"},
		{"", "FIELD"},
		{"message", "FIELD_MESSAGE"},
		{"PRIORITY", "FIELD_PRIORITY"},
		{"syslog_identifier", "FIELD_SYSLOG_IDENTIFIER"},
		{"message_id", "MESSAGE_ID"},
		{strings.Repeat("a", 70), strings.Repeat("A", 64)},
	} {
		got := fieldName(tc.key)
		if got != tc.want || !valid.MatchString(got) {
			t.Errorf("fieldName(%q) = %q, want %q (a name journald takes)", tc.key, got, tc.want)
		}
	}
}

func TestPriority(t *testing.T) {
	for _, tc := range []struct {
		level logrus.Level
		want  journal.Priority
	}{
		{logrus.PanicLevel, journal.PriCrit},
		{logrus.FatalLevel, journal.PriCrit},
		{logrus.ErrorLevel, journal.PriErr},
		{logrus.WarnLevel, journal.PriWarning},
		{logrus.InfoLevel, journal.PriInfo},
		{logrus.DebugLevel, journal.PriDebug},
		{logrus.TraceLevel, journal.PriDebug},
	} {
		if got := priority(tc.level); got != tc.want {
			t.Errorf("priority(%s) = %d, want %d", tc.level, got, tc.want)
		}
	}
}

// sent is one entry as the journal would have received it.
type sent struct {
	message  string
	priority journal.Priority
	fields   map[string]string
}

// fakeJournal records what is sent to it, or refuses it with err.
type fakeJournal struct {
	sent []sent
	err  error
}

func (j *fakeJournal) send(message string, p journal.Priority, fields map[string]string) error {
	if j.err != nil {
		return j.err
	}
	j.sent = append(j.sent, sent{message, p, fields})
	return nil
}

// journalLogger is a logger at level info in format, sending to j, with
// its output (stderr) in out.
func journalLogger(format logrus.Formatter, send sendFunc, out *bytes.Buffer) *logrus.Logger {
	l := logrus.New()
	l.SetFormatter(format)
	l.SetOutput(out)
	sendToJournal(l, send)
	return l
}

// TestJournalHook: a fallback's warning as server/report.go logs it arrives
// with its priority and each field as a journal field, and nothing is
// written to stderr.
func TestJournalHook(t *testing.T) {
	var j fakeJournal
	var stderr bytes.Buffer
	l := journalLogger(&logrus.TextFormatter{}, j.send, &stderr)
	l.WithFields(logrus.Fields{"container": "c1", "name": "debugger", "target": "t1", "via": "nri", "namespace": "pid",
		"reason": "target t1 is not running", "reason_kind": "target_not_running"}).Warn("targeting fell back to the pod's namespace")
	l.WithError(errors.New("connection refused")).WithField("inode", uint64(4026531836)).Info("two\nlines")
	l.Debug("below the level")

	want := []sent{
		{"targeting fell back to the pod's namespace", journal.PriWarning, map[string]string{
			"CONTAINER": "c1", "NAME": "debugger", "TARGET": "t1", "VIA": "nri", "NAMESPACE": "pid",
			"REASON": "target t1 is not running", "REASON_KIND": "target_not_running", "SYSLOG_IDENTIFIER": "cri-nstarget"}},
		{"two\nlines", journal.PriInfo, map[string]string{"ERROR": "connection refused", "INODE": "4026531836", "SYSLOG_IDENTIFIER": "cri-nstarget"}},
	}
	if fmt.Sprint(j.sent) != fmt.Sprint(want) {
		t.Errorf("sent to the journal:\n%v\nwant\n%v", j.sent, want)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr has %q, want nothing while the journal takes the entries", stderr.String())
	}
}

// TestJournalRefused: an entry the journal refuses goes to stderr in the
// configured format, after one line saying why; once the journal takes
// entries again, stderr has nothing more.
func TestJournalRefused(t *testing.T) {
	j := fakeJournal{err: errors.New("sendmsg: no such file or directory")}
	var stderr bytes.Buffer
	l := journalLogger(&logrus.JSONFormatter{}, j.send, &stderr)
	l.WithField("container", "c1").Warn("targeting fell back to the pod's namespace")
	l.WithField("container", "c2").Info("container joins the target's namespace")
	j.err = nil
	l.Info("serving CRI")

	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	want := []map[string]string{
		{"level": "warning", "msg": "the journal refused a log entry: writing them to stderr until it takes them again", "error": "sendmsg: no such file or directory"},
		{"level": "warning", "msg": "targeting fell back to the pod's namespace", "container": "c1"},
		{"level": "info", "msg": "container joins the target's namespace", "container": "c2"},
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr:\n%s\nwant %d JSON lines", stderr.String(), len(want))
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("stderr line %d is not JSON (log_format = json): %q", i+1, line)
		}
		for k, v := range want[i] {
			if fmt.Sprint(got[k]) != v {
				t.Errorf("stderr line %d: %s = %v, want %q (%s)", i+1, k, got[k], v, line)
			}
		}
	}
	if len(j.sent) != 1 || j.sent[0].message != "serving CRI" {
		t.Errorf("sent to the journal: %v, want only the entry after it came back", j.sent)
	}
}

// TestJournalAbsent: with go-systemd's own Send and no journald on this
// machine, entries go to stderr in the text format.
func TestJournalAbsent(t *testing.T) {
	if journal.Enabled() {
		t.Skip("a journal socket is there (/run/systemd/journal/socket): entries would be sent to it")
	}
	var stderr bytes.Buffer
	l := journalLogger(&logrus.TextFormatter{DisableTimestamp: true}, journal.Send, &stderr)
	l.WithField("container", "c1").Warn("targeting fell back to the pod's namespace")
	if want := `level=warning msg="targeting fell back to the pod's namespace" container=c1`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant a line %s", stderr.String(), want)
	}
}

// TestNewLoggerJournal: log_journal = off never sends to the journal; auto
// does not either when stderr is not journald's stream (the tests' stderr).
func TestNewLoggerJournal(t *testing.T) {
	for _, mode := range []string{"off", "auto"} {
		log, err := newLogger("info", "text", mode)
		if err != nil {
			t.Fatalf("newLogger(%s): %v", mode, err)
		}
		if len(log.Logger.Hooks) != 0 || log.Logger.Out != os.Stderr {
			t.Errorf("newLogger(%s): hooks %v, output %v; want stderr", mode, log.Logger.Hooks, log.Logger.Out)
		}
	}
	if _, err := newLogger("info", "text", "on"); err == nil {
		t.Error(`newLogger(log_journal "on") = nil error`)
	}
}

// probeEnv asks the test binary, run with a file as its stderr, to report
// what stderrIsJournal says, and to log a line through newLogger(auto).
const probeEnv = "NST_PROBE_STDERR_JOURNAL"

// TestStderrIsJournal runs the test binary with a file as stderr and
// JOURNAL_STREAM naming that file, another file, or nothing.
func TestStderrIsJournal(t *testing.T) {
	if os.Getenv(probeEnv) == "1" {
		fmt.Printf("stderr is journal: %v\n", stderrIsJournal())
		log, err := newLogger("info", "text", "auto")
		if err != nil {
			t.Fatal(err)
		}
		log.Info("probe")
		return
	}
	for _, tc := range []struct {
		desc   string
		stream func(stderr syscall.Stat_t) string // JOURNAL_STREAM; "-": not set
		want   bool
	}{
		{"JOURNAL_STREAM names stderr", func(st syscall.Stat_t) string { return fmt.Sprintf("%d:%d", st.Dev, st.Ino) }, true},
		{"another inode", func(st syscall.Stat_t) string { return fmt.Sprintf("%d:%d", st.Dev, st.Ino+1) }, false},
		{"another device", func(st syscall.Stat_t) string { return fmt.Sprintf("%d:%d", st.Dev+1, st.Ino) }, false},
		{"not set", func(syscall.Stat_t) string { return "-" }, false},
		{"malformed", func(syscall.Stat_t) string { return "journal" }, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			stderr, err := os.Create(t.TempDir() + "/stderr")
			if err != nil {
				t.Fatal(err)
			}
			defer stderr.Close()
			var st syscall.Stat_t
			if err := syscall.Fstat(int(stderr.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestStderrIsJournal$")
			cmd.Env = append(os.Environ(), probeEnv+"=1")
			if stream := tc.stream(st); stream != "-" {
				cmd.Env = append(cmd.Env, "JOURNAL_STREAM="+stream)
			}
			cmd.Stderr = stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("probe: %v\n%s", err, out)
			}
			if want := fmt.Sprintf("stderr is journal: %v\n", tc.want); !strings.Contains(string(out), want) {
				t.Errorf("probe says %q, want %q", out, want)
			}
			// No journal socket here: whatever JOURNAL_STREAM says, the
			// entry is on stderr, as text.
			if journal.Enabled() {
				return
			}
			b, err := os.ReadFile(stderr.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `level=info msg=probe`) {
				t.Errorf("stderr is %q, want the probe's entry as text", b)
			}
		})
	}
}
