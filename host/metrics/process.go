package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// process holds the gauges of this kip process's own state, read when
// scraped: whether it leads its node (leader election) and how long its
// node certificate (TLS bootstrap) has left.
type process struct {
	leader   atomic.Pointer[func() bool]
	notAfter atomic.Pointer[func() time.Time]
}

func (m *Metrics) registerProcess() {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "leader",
			Help: "1 while this kip process leads its virtual node (holds the node's Lease, or runs without leader election), 0 while it stands by.",
		}, func() float64 {
			f := m.process.leader.Load()
			if f == nil || (*f)() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "node_certificate_expiry_seconds",
			Help: "Seconds until the node's client certificate (TLS bootstrap) expires; negative once expired; 0 when kip uses a kubeconfig instead.",
		}, func() float64 {
			f := m.process.notAfter.Load()
			if f == nil {
				return 0
			}
			at := (*f)()
			if at.IsZero() {
				return 0
			}
			return at.Sub(m.now()).Seconds()
		}),
	)
}

// SetLeader makes kip_leader follow isLeader; without it kip_leader is 1
// (a kip without leader election leads).
func (m *Metrics) SetLeader(isLeader func() bool) {
	if m != nil {
		m.process.leader.Store(&isLeader)
	}
}

// SetNodeCertificate makes kip_node_certificate_expiry_seconds follow
// notAfter, the current node certificate's end.
func (m *Metrics) SetNodeCertificate(notAfter func() time.Time) {
	if m != nil {
		m.process.notAfter.Store(&notAfter)
	}
}
