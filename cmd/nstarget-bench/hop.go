package main

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The proxy's hop in the create's regime. The target measure's rounds are
// lone calls between runc's starts and stops; the unary measure's are warm
// calls in blocks. So the target measure also makes one Version call a
// side in each round, right after the round's create and start, and then
// the same call warm in blocks: the first against the second is what the
// regime costs, the first against direct what the proxy costs a lone call.
// Beside them, what the shim's garbage collector did over the rounds.

// gcSpan is the shim's collections and CPU time over a measure.
type gcSpan struct {
	log   *gcLog // nil: the shim's log is not known (a running shim)
	pid   int
	cpu0  int64
	start time.Time
}

func (b *bench) startGCSpan() gcSpan {
	s := gcSpan{pid: b.o.shimPID, start: time.Now()}
	if b.o.shimLog != "" {
		s.log = &gcLog{path: b.o.shimLog}
		s.log.mark()
	}
	if s.pid > 0 {
		s.cpu0, _ = cpuTicks(s.pid)
	}
	return s
}

// end says what the collector cost from start to now.
func (s gcSpan) end() string {
	span := time.Since(s.start)
	if s.log == nil {
		return "not known (a shim this run did not start)"
	}
	cycles, err := s.log.since()
	if err != nil {
		return "not known: " + err.Error()
	}
	var cpu time.Duration
	if s.pid > 0 {
		if t, err := cpuTicks(s.pid); err == nil {
			cpu = time.Duration(t-s.cpu0) * clockTick
		}
	}
	return sumGC(cycles).of(cpu, span) + fmt.Sprintf(" (over %v; the shim's CPU %v)", span.Round(time.Second), round(cpu))
}

// hop records the Version calls made in the target rounds beside the same
// call warm in blocks of 50, with podHop (POD CreateContainer through the
// shim over direct, pairwise, in the same rounds) and the collector's share.
func (b *bench) hop(ctx context.Context, inRounds [nSides][]time.Duration, podHop time.Duration, gc string) error {
	version := func(c side) error { _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); return err }
	for range 50 { // warm up all sides
		for _, c := range b.sides[:b.n] {
			version(c)
		}
	}
	warm, err := b.latency("Version", b.o.calls, 50, version)
	if err != nil {
		return err
	}
	rounds := summarizeAll(inRounds)
	pairwise := func(k int) time.Duration { return shift(inRounds[sideDirect], inRounds[k]) }
	inRegime := b.each(func(k int) string {
		return fmt.Sprintf("%s p50 %s (pairwise %s)", sideNames[k], signed(rounds[k].med-rounds[sideDirect].med), signed(pairwise(k)))
	}) + fmt.Sprintf("; splice p50 %s (pairwise %s)", signed(rounds[sideSplice].med-rounds[sideDirect].med), signed(pairwise(sideSplice)))
	b.results = append(b.results,
		result{measure: "Version, one a side in each TARGET round (the create's regime)", sides: rounds, figure: inRegime},
		result{measure: "Version, warm, in blocks of 50 (the unary measure's regime)", sides: warm, figure: added(warm)})
	b.figure(figHop, func(k int) outcome {
		inR, inB := pairwise(k), warm[k].med-warm[sideDirect].med
		m := fmt.Sprintf("%s in the rounds (pairwise; p50 %v against %v direct), %s warm in blocks: the regime %s; the splice %s and %s",
			signed(inR), round(rounds[k].med), round(rounds[sideDirect].med), signed(inB), signed(inR-inB),
			signed(pairwise(sideSplice)), signed(warm[sideSplice].med-warm[sideDirect].med))
		if k == sideShim {
			m += "; POD CreateContainer's hop " + signed(podHop)
		}
		return outcome{m, reported}
	})
	b.figures[figHopGC] = outcome{gc, reported}
	return nil
}
