package criwire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// FuzzCreate holds the reader and the rewrite to protobuf-go's decoder on
// arbitrary bytes: what ReadCreate reads is what protobuf-go decodes; a
// message ReadCreate refuses, protobuf-go refuses too; and a rewritten
// request decodes to the original with TARGET and unknown modes POD, no
// target_id and the added annotation, nothing else changed; ReadForwarded
// reads the same, with the rewrites as its forms (checkForwarded). Messages that
// protobuf-go refuses only for strings that are not UTF-8 are held to the
// reader alone: the rewrite must read back the same but for the modes.
func FuzzCreate(f *testing.F) {
	for _, b := range [][]byte{
		request(config(msg(vint(nsPID, 3), str(nsTargetID, "app"), userns, unknown()))),
		request(config(msg(vint(nsPID, 3), vint(nsIPC, 3), str(nsTargetID, "app")))),
		request(config(nil)),
		request(config(msg(vint(nsNetwork, 9), vint(nsPID, 1)))),
		request(config(msg(vint(nsPID, 3))), msg(sub(configLinux, sub(linuxSecurityContext, sub(securityNamespaces, vint(nsIPC, 3), str(nsTargetID, "b")))))),
		msg(str(createSandboxID, "sb"), sub(createConfig, sub(configMetadata, str(metadataName, "n")), sub(configLinux, sub(linuxSecurityContext, sub(securityNamespaces, vint(nsPID, 3), str(nsTargetID, "x")))))),
		str(containerID, "abc"),
		nil,
	} {
		f.Add(b)
	}
	const key, value = "io.cri-nstarget.request", "t"
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, err := ContainerID(b); err == nil {
			s := new(runtimeapi.StartContainerRequest)
			if proto.Unmarshal(b, s) == nil && s.GetContainerId() != id {
				t.Fatalf("ContainerID %q, protobuf-go %q", id, s.GetContainerId())
			}
		}
		c, err := ReadCreate(b)
		typed := new(runtimeapi.CreateContainerRequest)
		decoded := proto.Unmarshal(b, typed) == nil
		if err != nil {
			if decoded {
				t.Fatalf("ReadCreate refused what protobuf-go decodes: %v", err)
			}
			return
		}
		if decoded {
			if want := fromTyped(typed); !equalCreate(c, want) {
				t.Fatalf("read %+v %+v, protobuf-go %+v %+v", c, c.Namespaces, want, want.Namespaces)
			}
		}
		checkForwarded(t, b, c, Annotation{key, value})
		out, err := RewriteCreate(b, Annotation{key, value})
		if (err == errNoConfig) != !hasConfig(b) {
			t.Fatalf("rewrite: %v", err)
		}
		if err != nil {
			return
		}
		back, err := ReadCreate(out)
		if err != nil {
			t.Fatalf("the rewrite does not read back: %v", err)
		}
		want := c
		if ns := c.Namespaces; ns != nil {
			n := *ns
			for _, m := range []*runtimeapi.NamespaceMode{&n.Network, &n.PID, &n.IPC} {
				if !Known(*m) {
					*m = runtimeapi.NamespaceMode_POD
				}
			}
			n.TargetID = ""
			want.Namespaces = &n
		}
		if !equalCreate(back, want) {
			t.Fatalf("rewritten reads %+v %+v, want %+v %+v", back, back.Namespaces, want, want.Namespaces)
		}
		if !decoded {
			return
		}
		typedOut := new(runtimeapi.CreateContainerRequest)
		if err := proto.Unmarshal(out, typedOut); err != nil {
			t.Fatalf("protobuf-go decodes the request but not its rewrite: %v", err)
		}
		if ns := typed.GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
			for _, m := range []*runtimeapi.NamespaceMode{&ns.Network, &ns.Pid, &ns.Ipc} {
				if !Known(*m) {
					*m = runtimeapi.NamespaceMode_POD
				}
			}
			ns.TargetId = ""
		}
		if typed.Config.Annotations == nil {
			typed.Config.Annotations = map[string]string{}
		}
		typed.Config.Annotations[key] = value
		if !proto.Equal(typed, typedOut) {
			t.Fatalf("the rewrite changed more than the modes and the annotation:\n got %v\nwant %v", typedOut, typed)
		}
	})
}

// checkForwarded holds ReadForwarded to ReadCreate (c, what b reads) and
// RewriteCreate: it reads the same, and its forms are the rewrites, with and
// without add, exactly when a namespace mode is not POD, CONTAINER or NODE.
func checkForwarded(t *testing.T, b []byte, c Create, add Annotation) {
	t.Helper()
	rc, fw, err := ReadForwarded(b, add)
	if err != nil || !equalCreate(rc, c) {
		t.Fatalf("ReadForwarded read %+v (%v), ReadCreate %+v", rc, err, c)
	}
	ns := c.Namespaces
	if acts := ns != nil && !(Known(ns.PID) && Known(ns.IPC) && Known(ns.Network)); acts != (fw != nil) {
		t.Fatalf("forms %v for a request the shim acts on: %v", fw, acts)
	}
	if fw == nil {
		return
	}
	plain, perr := RewriteCreate(b)
	annotated, aerr := RewriteCreate(b, add)
	if perr != nil || aerr != nil || !bytes.Equal(fw.Plain, plain) || !bytes.Equal(fw.Annotated, annotated) {
		t.Fatalf("forms %x / %x, rewrites %x (%v) / %x (%v)", fw.Plain, fw.Annotated, plain, perr, annotated, aerr)
	}
}

// hasConfig: b holds a config field (as a length-delimited field).
func hasConfig(b []byte) bool {
	fs, _ := fields(b)
	for _, f := range fs {
		if f.bytes(createConfig) {
			return true
		}
	}
	return false
}

func fromTyped(r *runtimeapi.CreateContainerRequest) Create {
	c := Create{SandboxID: r.GetPodSandboxId(), Name: r.GetConfig().GetMetadata().GetName(), Attempt: r.GetConfig().GetMetadata().GetAttempt()}
	if md := r.GetSandboxConfig().GetMetadata(); md != nil {
		c.Pod = Pod{Name: md.GetName(), UID: md.GetUid(), Namespace: md.GetNamespace()}
	}
	if ns := r.GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		c.Namespaces = &Namespaces{Network: ns.GetNetwork(), PID: ns.GetPid(), IPC: ns.GetIpc(), TargetID: ns.GetTargetId()}
	}
	return c
}

func equalCreate(a, b Create) bool {
	if a.SandboxID != b.SandboxID || a.Name != b.Name || a.Attempt != b.Attempt || a.Pod != b.Pod || (a.Namespaces == nil) != (b.Namespaces == nil) {
		return false
	}
	return a.Namespaces == nil || *a.Namespaces == *b.Namespaces
}
