package node

// The agent's protocol: one line of JSON per message on the virtio-serial
// port, a request from the host, a reply from the guest with the same ID.
// The host sends one request at a time and skips replies to earlier ones
// (a request it gave up on) and lines that are not JSON; so does the agent.

// request is one command for the agent.
type request struct {
	ID     uint64 `json:"id"`
	Script string `json:"script"` // run by /bin/sh -c, as root, stdin /dev/null
	// TimeoutMS: after this the agent kills the command's process group;
	// 0 means no limit.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// reply is the agent's answer to the request with the same ID.
type reply struct {
	ID     uint64 `json:"id"`
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	Code   int    `json:"code"` // exit status; 128+N when killed by signal N
	// Error says why the command did not run or did not finish (its
	// timeout); Code is then -1 or the status it had when killed.
	Error string `json:"error,omitempty"`
	// TimedOut: the agent killed the command at the request's timeout, that
	// is at the host's deadline, which may not have fired there yet.
	TimedOut bool `json:"timed_out,omitempty"`
}
