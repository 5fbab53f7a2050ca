// Command nstarget-matrix runs the conformance matrix: the TARGET suite
// (conformance/: nstarget-conformance, as make release ships it) and critest against a private
// containerd, directly and through cri-nstarget, and compares the results.
//
//	nstarget-matrix run --backend containerd-1.6 --suite bin/nstarget-conformance --critest bin/critest --out DIR
//	nstarget-matrix compare DIR/critest-containerd-1.6-direct.xml DIR/critest-containerd-1.6-shim.xml
//	nstarget-matrix report --docs docs/reports/conformance.md DIR
//	nstarget-matrix upstream --docs docs/reports/conformance.md bin/node-conformance
//
// critest -benchmark is nstarget-bench's (nstarget-bench critest).
//
// run needs root, containerd and runc (make deps); critest also needs
// iptables, iproute2 and containernetworking-plugins for its pod network.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(ctx, os.Args[2:])
	case "compare":
		err = compareCmd(os.Args[2:])
	case "report":
		err = reportCmd(os.Args[2:])
	case "upstream":
		err = upstreamCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-matrix:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nstarget-matrix run|compare|report|upstream [flags]")
	os.Exit(2)
}

func compareCmd(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	fs.Parse(args)
	if fs.NArg() != 2 {
		return fmt.Errorf("compare: want two junit reports (direct, shim), got %d arguments", fs.NArg())
	}
	base, err := readJUnit(fs.Arg(0))
	if err != nil {
		return err
	}
	other, err := readJUnit(fs.Arg(1))
	if err != nil {
		return err
	}
	d := compareJUnit(base, other)
	fmt.Print(d.String(fs.Arg(0), fs.Arg(1)))
	if !d.Same() {
		return fmt.Errorf("critest: the sets of passing specs differ")
	}
	return nil
}
