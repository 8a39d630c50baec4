package clusterip

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.rules from what the code renders")

// web is a TCP Service with two endpoints, given out of order, once
// twice and once as IPv6 (which is not programmed).
func web() Service {
	return Service{Namespace: "default", Name: "web", ClusterIPs: []string{"10.0.0.10"},
		Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: []Endpoint{
			{IP: "10.1.0.6", Port: 8080}, {IP: "10.1.0.5", Port: 8080}, {IP: "10.1.0.6", Port: 8080}, {IP: "fd00::6", Port: 8080},
		}}}}
}

// TestRenderGolden renders tables into the iptables-restore input of a
// first sync in an empty namespace, compared with testdata/NAME.rules
// (go test -update rewrites them; read the diff).
func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name     string
		services []Service
	}{
		{"empty", nil},
		{"two-endpoints", []Service{web()}},
		{"named-ports-udp-and-tcp", []Service{{Namespace: "kube-system", Name: "dns", ClusterIPs: []string{"10.0.0.53"},
			Ports: []Port{
				// A named target port resolves per endpoint: the two pods
				// listen on different numbers.
				{Name: "dns", Protocol: "UDP", Port: 53, Endpoints: []Endpoint{{IP: "10.1.0.7", Port: 5353}, {IP: "10.1.0.8", Port: 53}}},
				{Name: "dns-tcp", Protocol: "TCP", Port: 53, Endpoints: []Endpoint{{IP: "10.1.0.7", Port: 5353}, {IP: "10.1.0.8", Port: 53}}},
			}}}},
		{"client-ip-affinity", []Service{func() Service { s := web(); s.AffinitySeconds = 10800; return s }()}},
		{"no-endpoints", []Service{{Namespace: "default", Name: "idle", ClusterIPs: []string{"10.0.0.11"},
			Ports: []Port{{Name: "", Protocol: "TCP", Port: 443}}}}},
		{"one-endpoint-dual-stack-sctp", []Service{{Namespace: "default", Name: "solo", ClusterIPs: []string{"10.0.0.12", "fd00::12"},
			Ports: []Port{
				{Name: "a", Protocol: "TCP", Port: 8000, Endpoints: []Endpoint{{IP: "10.1.0.9", Port: 8000}}},
				{Name: "s", Protocol: "SCTP", Port: 9000, Endpoints: []Endpoint{{IP: "10.1.0.9", Port: 9000}}},
			}}}},
		{"three-endpoints", []Service{{Namespace: "default", Name: "three", ClusterIPs: []string{"10.0.0.13"},
			Ports: []Port{{Name: "", Protocol: "TCP", Port: 80, Endpoints: []Endpoint{
				{IP: "10.1.0.10", Port: 80}, {IP: "10.1.0.2", Port: 80}, {IP: "10.1.0.9", Port: 80},
			}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := restoreInput(nil, render(tt.services), false, nil)
			path := filepath.Join("testdata", tt.name+".rules")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got; go test -update rewrites it):\n%s", path, diff)
			}
		})
	}
}

func TestRestoreInputRewritesOnlyWhatChanged(t *testing.T) {
	base := []Service{web(), {Namespace: "default", Name: "other", ClusterIPs: []string{"10.0.0.20"},
		Ports: []Port{{Protocol: "UDP", Port: 53, Endpoints: []Endpoint{{IP: "10.1.0.20", Port: 53}}}}}}
	withThird := func() []Service {
		s := web()
		s.Ports[0].Endpoints = append(s.Ports[0].Endpoints, Endpoint{IP: "10.1.0.7", Port: 8080})
		return []Service{s, base[1]}
	}
	svc := chainName(svcPrefix, "default/web:http/tcp")
	sep := func(ep string) string { return chainName(sepPrefix, "default/web:http/tcp/"+ep) }
	other := chainName(svcPrefix, "default/other/udp")
	tests := []struct {
		name string
		have ruleset
		// unknown: have came from iptables-save.
		unknown bool
		hooked  map[string]bool
		want    []Service
		// declared and deleted chains, and whether the OUTPUT rule is
		// inserted, per table.
		declared, deleted map[string][]string
		hooks             []string
	}{
		{name: "nothing changed", have: render(base), hooked: both(), want: base},
		{name: "an endpoint more rewrites its Service chain and adds its endpoint chain",
			have: render(base), hooked: both(), want: withThird(),
			declared: map[string][]string{tableNat: sorted(svc, sep("10.1.0.7:8080"))}},
		{name: "an endpoint fewer rewrites its Service chain and deletes its endpoint chain",
			have: render(withThird()), hooked: both(), want: base,
			declared: map[string][]string{tableNat: sorted(svc, sep("10.1.0.7:8080"))},
			deleted:  map[string][]string{tableNat: {sep("10.1.0.7:8080")}}},
		{name: "a Service gone takes its rules and chains with it",
			have: render(base), hooked: both(), want: base[1:],
			declared: map[string][]string{tableNat: sorted(servicesChain, svc, sep("10.1.0.5:8080"), sep("10.1.0.6:8080"))},
			deleted:  map[string][]string{tableNat: sorted(svc, sep("10.1.0.5:8080"), sep("10.1.0.6:8080"))}},
		{name: "losing every endpoint moves the Service to the filter table's rejects",
			have: render(base), hooked: both(), want: func() []Service { s := web(); s.Ports[0].Endpoints = nil; return []Service{s, base[1]} }(),
			declared: map[string][]string{
				tableFilter: {servicesChain},
				tableNat:    sorted(servicesChain, svc, sep("10.1.0.5:8080"), sep("10.1.0.6:8080")),
			},
			deleted: map[string][]string{tableNat: sorted(svc, sep("10.1.0.5:8080"), sep("10.1.0.6:8080"))}},
		{name: "after iptables-save every chain is written and strangers are deleted",
			have:    ruleset{tableNat: {servicesChain: nil, svc: nil, "KIP-SVC-LEFTOVER": nil}, tableFilter: {}},
			unknown: true, hooked: map[string]bool{tableNat: true}, want: base,
			declared: map[string][]string{
				tableFilter: {servicesChain},
				tableNat:    sorted(servicesChain, svc, sep("10.1.0.5:8080"), sep("10.1.0.6:8080"), other, chainName(sepPrefix, "default/other/udp/10.1.0.20:53"), "KIP-SVC-LEFTOVER"),
			},
			deleted: map[string][]string{tableNat: {"KIP-SVC-LEFTOVER"}},
			hooks:   []string{tableFilter}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := string(restoreInput(tt.have, render(tt.want), tt.unknown, tt.hooked))
			declared, deleted, hooks := map[string][]string{}, map[string][]string{}, []string(nil)
			table := ""
			for _, l := range strings.Split(strings.TrimSpace(input), "\n") {
				switch {
				case strings.HasPrefix(l, "*"):
					table = l[1:]
				case strings.HasPrefix(l, ":"):
					declared[table] = append(declared[table], strings.Fields(l[1:])[0])
				case strings.HasPrefix(l, "-X "):
					deleted[table] = append(deleted[table], l[3:])
				case l == hookRule:
					hooks = append(hooks, table)
				}
			}
			for table := range declared {
				slices.Sort(declared[table])
			}
			if diff := cmp.Diff(nonNil(tt.declared), declared); diff != "" {
				t.Errorf("declared chains (-want +got):\n%s\ninput:\n%s", diff, input)
			}
			if diff := cmp.Diff(nonNil(tt.deleted), deleted); diff != "" {
				t.Errorf("deleted chains (-want +got):\n%s\ninput:\n%s", diff, input)
			}
			if diff := cmp.Diff(tt.hooks, hooks); diff != "" {
				t.Errorf("OUTPUT rules inserted in (-want +got):\n%s", diff)
			}
		})
	}
}

func both() map[string]bool { return map[string]bool{tableNat: true, tableFilter: true} }

func sorted(chains ...string) []string { return slices.Sorted(slices.Values(chains)) }

func nonNil(m map[string][]string) map[string][]string {
	if m == nil {
		return map[string][]string{}
	}
	return m
}

func TestParseSaved(t *testing.T) {
	saved := `# Generated by iptables-save v1.8.9 (nf_tables)
*mangle
:PREROUTING ACCEPT [0:0]
:KIP-ELSEWHERE - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KIP-SERVICES - [0:0]
-A OUTPUT -d 169.254.169.254/32 -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KIP-SERVICES - [0:0]
:KIP-SVC-ABC - [0:0]
:KUBE-SERVICES - [0:0]
-A OUTPUT -m comment --comment "kip cell: ClusterIP services" -j KIP-SERVICES
COMMIT
`
	have, hooked := parseSaved([]byte(saved))
	wantHave := ruleset{tableNat: {servicesChain: nil, "KIP-SVC-ABC": nil}, tableFilter: {servicesChain: nil}}
	if diff := cmp.Diff(wantHave, have); diff != "" {
		t.Errorf("chains (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{tableNat: true}, hooked); diff != "" {
		t.Errorf("hooked tables (-want +got):\n%s", diff)
	}
}
