package main

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Setenv("NODE_NAME", "n1")
	t.Setenv("POD_NAMESPACE", "cri-nstarget")
	o, err := parse([]string{"install", "--max-concurrent-restarts=3"})
	if err != nil || o.mode != "install" || o.restarts != 3 || o.root != "/host" || o.node != "n1" {
		t.Errorf("parse: %+v %v", o, err)
	}
	for _, args := range [][]string{{}, {"uninstall"}, {"cleanup", "--max-concurrent-restarts=0"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%q): no error", args)
		}
	}
	t.Setenv("NODE_NAME", "")
	if _, err := parse([]string{"cleanup"}); err == nil || !strings.Contains(err.Error(), "NODE_NAME") {
		t.Errorf("parse without NODE_NAME: %v", err)
	}
}
