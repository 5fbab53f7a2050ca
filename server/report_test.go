package server

import (
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCreateStepsLogged: at debug level a targeted create says where its
// time went, step by step, on both paths.
func TestCreateStepsLogged(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig func(testing.TB, bool) *rig) {
		r := newRig(t, false)
		log, hook := test.NewNullLogger()
		log.SetLevel(logrus.DebugLevel)
		r.server.target.report.log = logrus.NewEntry(log)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range hook.AllEntries() {
			if e.Message != "create steps" {
				continue
			}
			for _, f := range []string{"prepare_record_us", "forward_us", "point_us", "answer_us", "total_us"} {
				if _, ok := e.Data[f].(int64); !ok {
					t.Errorf("create steps: no %s in %v", f, e.Data)
				}
			}
			if answer := e.Data["answer_us"].(int64); r.nri == nil && answer != 0 || e.Data["container"] != id {
				t.Errorf("create steps %v: an NRI answer's time on the Update path, or another container", e.Data)
			}
			return
		}
		t.Error("no create steps logged at debug level")
	})
}
