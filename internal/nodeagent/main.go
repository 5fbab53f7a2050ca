// Command nodeagent is internal/node's agent inside a node VM: it serves
// requests on a virtio-serial port (node.Serve), running each with
// /bin/sh -c as root and answering with its output and exit status. The node
// image (hack/node/image.sh) runs it from the host's 9p share when the port
// appears:
//
//	nstarget-node-agent /dev/virtio-ports/nst.agent
//
// Built static on the host (CGO_ENABLED=0), so any guest runs it. A read of
// the port ends (EOF) while nothing is connected on the host side; it then
// reads again a little later.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/node"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nstarget-node-agent PORT")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-node-agent:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	port, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open port: %w", err)
	}
	defer port.Close()
	for {
		if err := node.Serve(port); !errors.Is(err, io.EOF) {
			return fmt.Errorf("serve %s: %w", path, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
