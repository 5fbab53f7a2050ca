//go:build kubetest

package kubetest

import (
	"context"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/test/e2e/framework"
	e2epod "k8s.io/kubernetes/test/e2e/framework/pod"
	imageutils "k8s.io/kubernetes/test/utils/image"
	admissionapi "k8s.io/pod-security-admission/api"
)

// The processes' marks: a sleep whose argument only that container uses,
// so that `ps` names the container each process belongs to.
const (
	appMark      = "sleep 10017" // the target: the pod's "app" container
	sidecarMark  = "sleep 10029" // another container of the pod, not targeted
	debuggerMark = "sleep 10043" // the ephemeral container
)

// What kubectl debug --target=app does, on the API: an ephemeral container
// whose TargetContainerName is "app". The kubelet sends its CreateContainer
// with namespace_options.pid = TARGET and target_id = app's container, and
// the runtime must put it in app's PID namespace. Upstream's Ephemeral
// Containers specs never set TargetContainerName; this one does.
//
// Its label, cri-nstarget, is what make e2e-upstream selects in this
// binary: importing k8s.io/kubernetes/test/e2e for its suite setup
// registers some of upstream's specs here too.
var _ = framework.SIGDescribe("node")(framework.WithLabel("cri-nstarget"), "Ephemeral Containers with a target", func() {
	f := framework.NewDefaultFramework("nstarget-target")
	f.NamespacePodSecurityLevel = admissionapi.LevelBaseline

	ginkgo.It("should see the target container's processes, and only those, in the target's PID namespace", func(ctx context.Context) {
		podClient := e2epod.NewPodClient(f)
		busybox := imageutils.GetE2EImage(imageutils.BusyBox)

		ginkgo.By("creating a pod whose containers each have a PID namespace of their own")
		pod := podClient.CreateSync(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "nstarget-target"},
			Spec: v1.PodSpec{
				// The default, said: no shared process namespace, so only
				// targeting puts the debugger beside app's processes.
				ShareProcessNamespace: ptrTo(false),
				Containers: []v1.Container{
					{Name: "app", Image: busybox, Command: strings.Fields(appMark)},
					{Name: "sidecar", Image: busybox, Command: strings.Fields(sidecarMark)},
				},
			},
		})

		ginkgo.By("adding an ephemeral container that targets app")
		ec := &v1.EphemeralContainer{
			TargetContainerName: "app",
			EphemeralContainerCommon: v1.EphemeralContainerCommon{
				Name: "debugger", Image: busybox, Command: strings.Fields(debuggerMark),
			},
		}
		err := podClient.AddEphemeralContainerSync(ctx, pod, ec, 2*time.Minute)
		framework.ExpectNoError(err, "add the ephemeral container to %s", e2epod.FormatPod(pod))

		ginkgo.By("listing the processes the debugger sees")
		seen := processes(f, pod.Name, "debugger")
		gomega.Expect(seen).To(gomega.HaveKeyWithValue("1", appMark),
			"the debugger's PID 1 must be app's process: it is in app's PID namespace")
		gomega.Expect(values(seen)).To(gomega.ContainElement(debuggerMark), "the debugger sees itself")
		// Nothing else: not the sidecar's process, not the sandbox's (the
		// fallback to the pod's namespace), only ps itself.
		gomega.Expect(values(seen)).To(gomega.HaveEach(gomega.BeElementOf(appMark, debuggerMark, psArgs)),
			"the debugger must see app's processes and its own only")
		gomega.Expect(values(seen)).NotTo(gomega.ContainElement(sidecarMark))

		ginkgo.By("listing the processes app sees: the debugger's are among them")
		seen = processes(f, pod.Name, "app")
		gomega.Expect(values(seen)).To(gomega.ContainElements(appMark, debuggerMark))
	})
})

// psArgs is the command line processes runs.
const psArgs = "ps -o pid,args"

// processes runs busybox's ps in the pod's container and returns its
// processes, PID to command line.
func processes(f *framework.Framework, pod, container string) map[string]string {
	stdout, stderr, err := e2epod.ExecCommandInContainerWithFullOutput(f, pod, container, strings.Fields(psArgs)...)
	framework.ExpectNoError(err, "ps in %s: %s", container, stderr)
	framework.Logf("ps in %s:\n%s", container, stdout)
	procs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
		pid, args, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			framework.Failf("ps in %s: line %q", container, line)
		}
		procs[pid] = strings.TrimSpace(args)
	}
	return procs
}

func values(m map[string]string) []string {
	var vs []string
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

func ptrTo[T any](v T) *T { return &v }
