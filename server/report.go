package server

import (
	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// reporter says what targeting decided: a log line per decision, and the
// targeting metric. It holds nothing but where those go.
type reporter struct {
	log     *logrus.Entry
	metrics Metrics // nil: none
}

// outcome logs what targeting decided for container id: one line per targeted namespace, one warning per
// fallback, each naming both containers.
func (r reporter) outcome(id string, o *outcome) {
	log := r.log.WithFields(logrus.Fields{"container": id, "name": o.name, "target": o.rec.Target, "via": o.rec.Via})
	for _, f := range o.fails {
		r.targeting(f.kind, "create", oci.Fallback, f.why)
		log.WithFields(logrus.Fields{"namespace": f.kind, "reason": f.reason, "reason_kind": f.why}).Warn("targeting fell back to the pod's namespace")
	}
	for kind, ns := range o.rec.Namespaces {
		if ns.Result == oci.Targeted {
			r.targeting(kind, "create", oci.Targeted, reasonNone)
			log.WithFields(logrus.Fields{"namespace": kind, "inode": ns.Inode, "pin": ns.Path}).Info("container joins the target's namespace")
		}
	}
}

// targeting reports one targeting decision to the metrics, if any.
func (r reporter) targeting(namespace, stage, result string, why reasonKind) {
	if r.metrics != nil {
		r.metrics.Targeting(namespace, stage, result, string(why))
	}
}
