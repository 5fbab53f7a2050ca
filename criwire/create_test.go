package criwire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// Messages are built here with protowire, field by field, so that they can
// hold what cri-api's Go types cannot: strings that are not UTF-8 and fields
// the module's cri-api does not know.

func msg(fs ...[]byte) []byte { return bytes.Join(fs, nil) }

func str(n protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, n, protowire.BytesType), s)
}

func sub(n protowire.Number, fs ...[]byte) []byte { return str(n, string(msg(fs...))) }

func vint(n protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
}

func kv(n protowire.Number, k, v string) []byte { return sub(n, str(1, k), str(2, v)) }

// unknown is a run of fields no cri-api declares (numbers past any in use),
// one of each wire type, a string among them that is not UTF-8.
func unknown() []byte {
	return msg(vint(1000, 7), str(1001, "\xff\xfe"),
		protowire.AppendFixed32(protowire.AppendTag(nil, 1002, protowire.Fixed32Type), 5),
		protowire.AppendFixed64(protowire.AppendTag(nil, 1003, protowire.Fixed64Type), 6),
		protowire.AppendTag(protowire.AppendTag(nil, 1004, protowire.StartGroupType), 1004, protowire.EndGroupType))
}

const notUTF8 = "\xff\xfea\xc3" // the env value of the issue

// config is a ContainerConfig as kubelet sends one, with ns as its
// namespace_options (none if nil), values that are not UTF-8 in an env, a
// mount, a label and an annotation, and unknown fields at every depth;
// extra follows its last field.
func config(ns []byte, extra ...[]byte) []byte {
	var nsField []byte
	if ns != nil {
		nsField = sub(securityNamespaces, ns)
	}
	return msg(
		sub(configMetadata, str(metadataName, "debugger"), vint(metadataAttempt, 3), unknown()),
		sub(2, str(1, "busybox")), // image
		str(3, "sh"),              // command
		kv(6, "BLOB", notUTF8),    // envs
		sub(7, str(1, "/data"), str(2, "/host/\xff"), unknown()), // mounts
		kv(9, "label\xff", "v"),                                  // labels
		kv(configAnnotations, "note", "\xc3("),                   // annotations
		sub(configLinux, sub(1, vint(6, 100)), // resources
			sub(linuxSecurityContext, vint(2, 1), nsField, unknown()), unknown()),
		unknown(),
		msg(extra...),
	)
}

// request is a CreateContainerRequest around configs.
func request(configs ...[]byte) []byte {
	var cs [][]byte
	for _, c := range configs {
		cs = append(cs, str(createConfig, string(c)))
	}
	return msg(str(createSandboxID, "sb1"), msg(cs...), sandboxConfig, unknown())
}

// sandboxConfig is a PodSandboxConfig as kubelet sends one in a
// CreateContainerRequest: its metadata (the pod), labels and unknown fields.
var sandboxConfig = sub(createSandboxConfig,
	sub(sandboxMetadata, str(podName, "web"), str(podUID, "0d6c"), str(podNamespace, "shop"), vint(4, 1), unknown()),
	kv(6, "pod\xff", "x"), unknown())

// web is the pod sandboxConfig names.
var web = Pod{Name: "web", UID: "0d6c", Namespace: "shop"}

// userns is a NamespaceOption.userns_options, kept whatever the rewrite.
var userns = sub(5, vint(1, 1), sub(2, vint(1, 0), vint(2, 100000), vint(3, 65536)))

func TestReadCreate(t *testing.T) {
	for _, tc := range []struct {
		desc string
		in   []byte
		want Create
	}{
		{"pid TARGET", request(config(msg(vint(nsPID, 3), str(nsTargetID, "app"), userns, unknown()))),
			Create{"sb1", "debugger", 3, &Namespaces{PID: 3, TargetID: "app"}, web}},
		{"no namespace_options", request(config(nil)), Create{"sb1", "debugger", 3, nil, web}},
		{"empty namespace_options", request(config(msg())), Create{"sb1", "debugger", 3, &Namespaces{}, web}},
		{"no config", msg(str(createSandboxID, "sb1")), Create{SandboxID: "sb1"}},
		{"ipc TARGET, unknown network mode", request(config(msg(vint(nsNetwork, 9), vint(nsIPC, 3), str(nsTargetID, "app")))),
			Create{"sb1", "debugger", 3, &Namespaces{Network: 9, IPC: 3, TargetID: "app"}, web}},
		{"a negative mode, as protobuf decodes an int32", request(config(msg(vint(nsPID, uint64(1<<64-1))))),
			Create{"sb1", "debugger", 3, &Namespaces{PID: -1}, web}},
		{"a mode past 32 bits is truncated, as protobuf does", request(config(msg(vint(nsPID, 1<<32|3)))),
			Create{"sb1", "debugger", 3, &Namespaces{PID: 3}, web}},
		// protobuf: the last scalar wins, messages merge
		{"configs merged", request(
			config(msg(vint(nsPID, 3), str(nsTargetID, "first"))),
			msg(sub(configMetadata, str(metadataName, "second")), sub(configLinux, sub(linuxSecurityContext, sub(securityNamespaces, vint(nsIPC, 3))))),
			msg(sub(configLinux, sub(linuxSecurityContext, sub(securityNamespaces, str(nsTargetID, "last")))))),
			Create{"sb1", "second", 3, &Namespaces{PID: 3, IPC: 3, TargetID: "last"}, web}},
		{"repeated scalar: the last wins", request(config(msg(vint(nsPID, 3), vint(nsPID, 1), str(nsTargetID, "a"), str(nsTargetID, "b")))),
			Create{"sb1", "debugger", 3, &Namespaces{PID: 1, TargetID: "b"}, web}},
		// a known field with another wire type is an unknown field
		{"wire types that do not match", request(config(msg(str(nsPID, "\x03"), vint(nsTargetID, 5), vint(nsIPC, 3)))),
			Create{"sb1", "debugger", 3, &Namespaces{IPC: 3}, web}},
		{"config as a varint is unknown", msg(str(createSandboxID, "sb1"), vint(createConfig, 1)), Create{SandboxID: "sb1"}},
		{"strings that are not UTF-8", msg(str(createSandboxID, "sb\xff"), sub(createConfig, sub(configMetadata, str(metadataName, "n\xfe"))),
			sub(createSandboxConfig, sub(sandboxMetadata, str(podName, "p\xfe"), str(podNamespace, "\xff")))),
			Create{SandboxID: "sb\xff", Name: "n\xfe", Pod: Pod{Name: "p\xfe", Namespace: "\xff"}}},
		// the pod, as protobuf reads it: the last scalar wins, messages merge
		{"sandbox configs merged", msg(sandboxConfig, sub(createSandboxConfig, sub(sandboxMetadata, str(podName, "api")))),
			Create{Pod: Pod{Name: "api", UID: "0d6c", Namespace: "shop"}}},
		{"metadata as a varint is unknown", msg(sub(createSandboxConfig, vint(sandboxMetadata, 1))), Create{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ReadCreate(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v %+v, want %+v %+v", got, got.Namespaces, tc.want, tc.want.Namespaces)
			}
		})
	}
}

func TestReadCreateMalformed(t *testing.T) {
	full := request(config(msg(vint(nsPID, 3), str(nsTargetID, "app"))))
	for _, tc := range []struct {
		desc string
		in   []byte
	}{
		{"truncated", full[:len(full)-3]},
		{"field number 0", vint(0, 1)},
		{"an end group with no start", protowire.AppendTag(nil, 7, protowire.EndGroupType)},
		{"a truncated namespace_options", request(msg(sub(configLinux, sub(linuxSecurityContext, str(securityNamespaces, "\x10")))))},
		{"a length past the end", []byte{0x12, 0x7f, 0x00}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if c, err := ReadCreate(tc.in); err == nil {
				t.Errorf("read %+v from a malformed message", c)
			}
			if _, err := RewriteCreate(tc.in); err == nil {
				t.Error("rewrote a malformed message")
			}
		})
	}
}

func TestRewriteCreate(t *testing.T) {
	token := Annotation{Key: "io.cri-nstarget.request", Value: "t0k3n"}
	tokenField := kv(configAnnotations, token.Key, token.Value)
	for _, tc := range []struct {
		desc string
		in   []byte
		add  []Annotation
		want []byte
	}{
		{"pid TARGET: POD, no target_id, the rest as it came",
			request(config(msg(vint(nsNetwork, 0), vint(nsPID, 3), str(nsTargetID, "app"), userns, vint(6, 1), unknown()))), nil,
			request(config(msg(vint(nsNetwork, 0), vint(nsPID, 0), userns, vint(6, 1), unknown())))},
		{"pid and ipc TARGET, with the NRI token",
			request(config(msg(vint(nsPID, 3), vint(nsIPC, 3), str(nsTargetID, "app")))), []Annotation{token},
			request(config(msg(vint(nsPID, 0), vint(nsIPC, 0)), tokenField))},
		{"unknown modes are POD too; known ones stay",
			request(config(msg(vint(nsNetwork, 2), vint(nsPID, 7), vint(nsIPC, uint64(1<<64-1)), str(nsTargetID, "")))), nil,
			request(config(msg(vint(nsNetwork, 2), vint(nsPID, 0), vint(nsIPC, 0))))},
		{"nothing to change: the same bytes",
			request(config(msg(vint(nsPID, 1), userns, unknown()))), nil,
			request(config(msg(vint(nsPID, 1), userns, unknown())))},
		{"no namespace_options, a token: only the token",
			request(config(nil)), []Annotation{token}, request(config(nil, tokenField))},
		{"every occurrence rewritten; the token after the last config's annotations",
			request(config(msg(vint(nsPID, 3), str(nsTargetID, "a"))), msg(kv(configAnnotations, token.Key, "spoofed"), sub(configLinux, sub(linuxSecurityContext, sub(securityNamespaces, vint(nsIPC, 3), str(nsTargetID, "b")))))),
			[]Annotation{token},
			request(config(msg(vint(nsPID, 0))), msg(kv(configAnnotations, token.Key, "spoofed"), sub(configLinux, sub(linuxSecurityContext, sub(securityNamespaces, vint(nsIPC, 0)))), tokenField))},
		{"wire types that do not match are unknown fields, kept",
			request(config(msg(str(nsPID, "\x03"), vint(nsTargetID, 5), vint(nsIPC, 3)))), nil,
			request(config(msg(str(nsPID, "\x03"), vint(nsTargetID, 5), vint(nsIPC, 0))))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := RewriteCreate(tc.in, tc.add...)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("rewritten:\n got %q\nwant %q", got, tc.want)
			}
			c, err := ReadCreate(got)
			if err != nil {
				t.Fatal(err)
			}
			if ns := c.Namespaces; ns != nil && (!Known(ns.PID) || !Known(ns.IPC) || !Known(ns.Network) || ns.TargetID != "") {
				t.Errorf("the backend would read %+v", ns)
			}
		})
	}
}

func TestRewriteCreateWithoutConfig(t *testing.T) {
	in := msg(str(createSandboxID, "sb1"), unknown())
	if _, err := RewriteCreate(in, Annotation{"k", "v"}); !errors.Is(err, errNoConfig) {
		t.Errorf("annotated a request without config: %v", err)
	}
	if out, err := RewriteCreate(in); err != nil || !bytes.Equal(out, in) {
		t.Errorf("nothing to change: %q, %v", out, err)
	}
}

func TestContainerID(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{str(containerID, "abc"), "abc"},
		{msg(str(containerID, "a"), unknown(), str(containerID, "b\xff")), "b\xff"},
		{msg(vint(containerID, 1)), ""},
		{nil, ""},
	} {
		if got, err := ContainerID(tc.in); err != nil || got != tc.want {
			t.Errorf("ContainerID(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := ContainerID([]byte{0x0a, 0x05, 'a'}); err == nil {
		t.Error("read an id from a truncated message")
	}
}

// TestReadForwarded: the read and the forms in one step; forms only for a
// request the shim acts on, whose Annotated form carries the annotation
// and Plain not.
func TestReadForwarded(t *testing.T) {
	token := Annotation{Key: "io.cri-nstarget.request", Value: "t0k3n"}
	for _, tc := range []struct {
		desc       string
		in         []byte
		plain, ann []byte // nil: no forms
	}{
		{"pid TARGET", request(config(msg(vint(nsPID, 3), str(nsTargetID, "app")))),
			request(config(msg(vint(nsPID, 0)))), request(config(msg(vint(nsPID, 0)), kv(configAnnotations, token.Key, token.Value)))},
		{"an unknown mode", request(config(msg(vint(nsIPC, 9)))),
			request(config(msg(vint(nsIPC, 0)))), request(config(msg(vint(nsIPC, 0)), kv(configAnnotations, token.Key, token.Value)))},
		{"POD and CONTAINER, a target_id: as it came", request(config(msg(vint(nsPID, 1), str(nsTargetID, "app")))), nil, nil},
		{"no namespace_options: as it came", request(config(nil)), nil, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, fw, err := ReadForwarded(tc.in, token)
			if want, _ := ReadCreate(tc.in); err != nil || !equalCreate(c, want) {
				t.Fatalf("read %+v (%v), want %+v", c, err, want)
			}
			switch {
			case tc.plain == nil && fw != nil:
				t.Errorf("forms %q for a request the backend gets as it came", fw)
			case tc.plain != nil && (fw == nil || !bytes.Equal(fw.Plain, tc.plain) || !bytes.Equal(fw.Annotated, tc.ann)):
				t.Errorf("forms %q, want %q and %q", fw, tc.plain, tc.ann)
			}
		})
	}
	if _, _, err := ReadForwarded([]byte{0xff}); err == nil {
		t.Error("bytes that are not protobuf read")
	}
}
