package main

import "testing"

func TestField(t *testing.T) {
	const cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nmodel name\t: second\n"
	for _, tc := range []struct{ text, key, sep, want string }{
		{cpuinfo, "model name", ":", "AMD EPYC 7B13"},
		{cpuinfo, "model", ":", ""},
		{"NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n", "PRETTY_NAME", "=", `"Debian GNU/Linux 12 (bookworm)"`},
		{"MemTotal:       24567048 kB\n", "MemTotal", ":", "24567048 kB"},
	} {
		if got := field(tc.text, tc.key, tc.sep); got != tc.want {
			t.Errorf("field(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestMachineFacts(t *testing.T) {
	m := machineFacts()
	if m.cpus < 1 || m.kernel == "" {
		t.Errorf("machineFacts() = %+v: want CPUs and a kernel release", m)
	}
}
