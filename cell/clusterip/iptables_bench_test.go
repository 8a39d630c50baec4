package clusterip

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"
)

// BenchmarkIPTablesProgram measures what a real cell adds to an
// EndpointSlice change: one Program of a table of 1,000 Services with 10
// endpoints each in which one endpoint changed (an iptables-restore
// --noflush of the changed Service's chains), in a network namespace of
// its own. The first, whole sync is reported as first-sync-ms.
//
//	go test -run '^$' -bench IPTablesProgram -benchtime 100x ./cell/clusterip/
func BenchmarkIPTablesProgram(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("network namespaces and iptables need root")
	}
	ns := newNetns(b)
	ipt, err := NewIPTables(ns, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	table := make([]Service, 1000)
	for i := range table {
		eps := make([]Endpoint, 10)
		for e := range eps {
			eps[e] = Endpoint{IP: fmt.Sprintf("10.%d.%d.%d", 200+i/256, i%256, e+1), Port: 8080}
		}
		table[i] = Service{Namespace: "default", Name: fmt.Sprintf("s-%04d", i),
			ClusterIPs: []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
			Ports:      []Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: eps}}}
	}
	start := time.Now()
	if err := ipt.Program(b.Context(), table); err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	n := 0
	for b.Loop() {
		svc := &table[n%len(table)]
		eps := append([]Endpoint(nil), svc.Ports[0].Endpoints...)
		eps[0].IP = fmt.Sprintf("10.250.%d.%d", n/250%250, n%250+1)
		svc.Ports = []Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: eps}}
		if err := ipt.Program(b.Context(), table); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "first-sync-ms")
}
