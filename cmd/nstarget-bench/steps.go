package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stepNames are the steps a shim logs for each targeted create ("create
// steps", at debug level), in order; answer is the NRI answer's share of
// forward.
var stepNames = []string{"prepare_record", "forward", "answer", "point", "total"}

var (
	stepField = regexp.MustCompile(`\b(\w+)_us=(\d+)`)
	viaField  = regexp.MustCompile(`\bvia=(\w+)`)
)

// stepsTable reads the "create steps" lines of the shims' logs and prints,
// per path, each step's min / p50 / p99: where a TARGET create's time goes
// inside the shim.
func stepsTable(logs ...string) string {
	byVia := map[string]map[string][]time.Duration{}
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, "create steps") {
				continue
			}
			via := "?"
			if m := viaField.FindStringSubmatch(line); m != nil {
				via = m[1]
			}
			if byVia[via] == nil {
				byVia[via] = map[string][]time.Duration{}
			}
			for _, m := range stepField.FindAllStringSubmatch(line, -1) {
				us, _ := strconv.ParseInt(m[2], 10, 64)
				byVia[via][m[1]] = append(byVia[via][m[1]], time.Duration(us)*time.Microsecond)
			}
		}
		f.Close()
	}
	var b strings.Builder
	b.WriteString("Where a TARGET create's time goes inside the shim (its debug log), min / p50 / p99:\n\n")
	b.WriteString("| path | creates | " + strings.Join(stepNames, " | ") + " |\n|---|---|" + strings.Repeat("---|", len(stepNames)) + "\n")
	for _, via := range slices.Sorted(maps.Keys(byVia)) {
		steps := byVia[via]
		fmt.Fprintf(&b, "| %s | %d |", via, len(steps["total"]))
		for _, name := range stepNames {
			fmt.Fprintf(&b, " %s |", summarize(steps[name]))
		}
		b.WriteString("\n")
	}
	return b.String()
}
