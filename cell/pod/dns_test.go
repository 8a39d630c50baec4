package pod

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The cases below are the kubelet's (pkg/kubelet/network/dns/dns_test.go,
// v1.36), kept as they are there; where the kubelet compares options as a
// set, so do these.

const (
	testHostNameserver = "8.8.8.8"
	testHostDomain     = "host.domain"
)

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		data                           string
		nameservers, searches, options []string
		isErr                          bool
	}{
		{"", []string{}, []string{}, []string{}, false},
		{" ", []string{}, []string{}, []string{}, false},
		{"\n", []string{}, []string{}, []string{}, false},
		{"\t\n\t", []string{}, []string{}, []string{}, false},
		{"#comment\n", []string{}, []string{}, []string{}, false},
		{" #comment\n", []string{}, []string{}, []string{}, false},
		{"#comment\n#comment", []string{}, []string{}, []string{}, false},
		{"#comment\nnameserver", nil, nil, nil, true},
		{"#comment\nnameserver\nsearch", nil, nil, nil, true},
		{"#comment\nnameserver 1.2.3.4\nsearch", []string{"1.2.3.4"}, []string{}, []string{}, false},
		{"nameserver 1.2.3.4", []string{"1.2.3.4"}, []string{}, []string{}, false},
		{" nameserver 1.2.3.4", []string{"1.2.3.4"}, []string{}, []string{}, false},
		{"\tnameserver 1.2.3.4", []string{"1.2.3.4"}, []string{}, []string{}, false},
		{"nameserver\t1.2.3.4", []string{"1.2.3.4"}, []string{}, []string{}, false},
		{"nameserver \t 1.2.3.4", []string{"1.2.3.4"}, []string{}, []string{}, false},
		{"nameserver 1.2.3.4\nnameserver 5.6.7.8", []string{"1.2.3.4", "5.6.7.8"}, []string{}, []string{}, false},
		{"nameserver 1.2.3.4 #comment", []string{"1.2.3.4"}, []string{}, []string{}, false},
		{"search ", []string{}, []string{}, []string{}, false},
		{"search .", []string{}, []string{}, []string{}, false},
		{"search . foo", []string{}, []string{"foo"}, []string{}, false},
		{"search foo .", []string{}, []string{"foo"}, []string{}, false},
		{"search foo .  bar", []string{}, []string{"foo", "bar"}, []string{}, false},
		{"search foo", []string{}, []string{"foo"}, []string{}, false},
		{"search foo bar", []string{}, []string{"foo", "bar"}, []string{}, false},
		{"search foo. bar", []string{}, []string{"foo", "bar"}, []string{}, false},
		{"search foo bar bat\n", []string{}, []string{"foo", "bar", "bat"}, []string{}, false},
		{"search foo\nsearch bar", []string{}, []string{"bar"}, []string{}, false},
		{"nameserver 1.2.3.4\nsearch foo bar", []string{"1.2.3.4"}, []string{"foo", "bar"}, []string{}, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, []string{}, false},
		{"#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment", []string{"1.2.3.4"}, []string{"foo"}, []string{}, false},
		{"options ", []string{}, []string{}, []string{}, false},
		{"options ndots:5 attempts:2", []string{}, []string{}, []string{"ndots:5", "attempts:2"}, false},
		{"options ndots:1 ndots:5 attempts:2", []string{}, []string{}, []string{"ndots:5", "attempts:2"}, false},
		{"options ndots:1 edns0 attempts:2 single-request-reopen", []string{}, []string{}, []string{"edns0", "attempts:2", "single-request-reopen", "ndots:1"}, false},
		{"options ndots:1\noptions ndots:5 attempts:3", []string{}, []string{}, []string{"ndots:5", "attempts:3"}, false},
		{"options ndots:1 timeout:3 timeout:1 attempts:3\noptions ndots:5", []string{}, []string{}, []string{"ndots:5", "timeout:1", "attempts:3"}, false},
		{"options ndots:1 attempts:3\noptions ndots:1 attempts:3 ndots:5", []string{}, []string{}, []string{"ndots:5", "attempts:3"}, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, []string{"ndots:5", "attempts:4"}, false},
	}
	for _, tt := range tests {
		got, err := parseResolvConf([]byte(tt.data))
		if tt.isErr {
			if err == nil {
				t.Errorf("parseResolvConf(%q) = %+v, want an error", tt.data, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseResolvConf(%q): %v", tt.data, err)
			continue
		}
		want := dnsConfig{Servers: tt.nameservers, Searches: tt.searches, Options: sortedCopy(tt.options)}
		got.Options = sortedCopy(got.Options)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parseResolvConf(%q) (-want +got):\n%s", tt.data, diff)
		}
	}
}

func TestAppendOptionsKeepsTheFirstPlace(t *testing.T) {
	got := appendOptions([]string{"ndots:1", "edns0"}, "attempts:2", "ndots:5")
	if diff := cmp.Diff([]string{"ndots:5", "edns0", "attempts:2"}, got); diff != "" {
		t.Errorf("appendOptions (-want +got):\n%s", diff)
	}
}

func TestFitLimitsSearch(t *testing.T) {
	// 2048 = 128 + 127 * 15 + 15
	list2048 := []string{strings.Repeat("A", 128)}
	for range 15 {
		list2048 = append(list2048, strings.Repeat("A", 127))
	}
	numbered := []string{"testNS.svc.TEST", "svc.TEST", "TEST"}
	for i := 4; i <= 32; i++ {
		numbered = append(numbered, strconv.Itoa(i))
	}
	tests := []struct {
		desc      string
		hostNames []string
		want      []string
		event     string
	}{
		{"valid: 3 search paths", []string{"testNS.svc.TEST", "svc.TEST", "TEST"}, []string{"testNS.svc.TEST", "svc.TEST", "TEST"}, ""},
		{"valid: 5 search paths", []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, ""},
		{
			"invalid: longer than 256 characters in search path list",
			[]string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", strings.Repeat("B", 256), "BBB"},
			[]string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"},
			"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: testNS.svc.TEST svc.TEST TEST AAA BBB",
		},
		{"valid: 2048 characters in search path list", list2048, list2048, ""},
		{
			"invalid: 2050 characters in search path list",
			append(slices.Clone(list2048), "B"), list2048,
			"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(list2048, " "),
		},
		{"valid: 32 search paths", numbered, numbered, ""},
		{
			"invalid: 33 search paths",
			append(slices.Clone(numbered), "33"), numbered,
			"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(numbered, " "),
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var warnings []warning
			got := fitLimits(dnsConfig{Searches: slices.Clone(tt.hostNames)}, &warnings)
			if diff := cmp.Diff(tt.want, got.Searches); diff != "" {
				t.Errorf("searches (-want +got):\n%s", diff)
			}
			var want []warning
			if tt.event != "" {
				want = []warning{{ReasonDNSConfigForming, tt.event}}
			}
			if diff := cmp.Diff(want, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitLimitsNameservers(t *testing.T) {
	tests := []struct {
		desc  string
		in    []string
		want  []string
		event bool
	}{
		{"valid: 1 nameserver", []string{"127.0.0.1"}, []string{"127.0.0.1"}, false},
		{"valid: 3 nameservers", []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, false},
		{"invalid: 4 nameservers, trimmed to 3", []string{"127.0.0.1", "10.0.0.10", "8.8.8.8", "1.2.3.4"}, []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, true},
	}
	for _, tt := range tests {
		var warnings []warning
		got := fitLimits(dnsConfig{Servers: tt.in}, &warnings)
		if diff := cmp.Diff(tt.want, got.Servers); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.desc, diff)
		}
		if (len(warnings) > 0) != tt.event {
			t.Errorf("%s: warnings %v, want an event: %v", tt.desc, warnings, tt.event)
		}
	}
}

func TestMergeDNSOptions(t *testing.T) {
	three := "3"
	tests := []struct {
		desc     string
		existing []string
		pod      []corev1.PodDNSConfigOption
		want     []string
	}{
		{"Empty dnsConfigOptions", []string{"ndots:5", "debug"}, nil, []string{"ndots:5", "debug"}},
		{
			"No duplicated entries", []string{"ndots:5", "debug"},
			[]corev1.PodDNSConfigOption{{Name: "single-request"}, {Name: "attempts", Value: &three}},
			[]string{"ndots:5", "debug", "single-request", "attempts:3"},
		},
		{
			"Overwrite duplicated entries", []string{"ndots:5", "debug"},
			[]corev1.PodDNSConfigOption{{Name: "ndots", Value: &three}, {Name: "debug"}, {Name: "single-request"}, {Name: "attempts", Value: &three}},
			[]string{"ndots:3", "debug", "single-request", "attempts:3"},
		},
	}
	for _, tt := range tests {
		// kip's order is fixed (the kubelet's is a map's): compare it.
		if diff := cmp.Diff(tt.want, mergeDNSOptions(tt.existing, tt.pod)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.desc, diff)
		}
	}
}

func TestPodDNSType(t *testing.T) {
	tests := []struct {
		desc        string
		hostNetwork bool
		policy      corev1.DNSPolicy
		want        podDNSType
	}{
		{"valid DNSClusterFirst without hostnetwork", false, corev1.DNSClusterFirst, podDNSCluster},
		{"valid DNSClusterFirstWithHostNet with hostnetwork", true, corev1.DNSClusterFirstWithHostNet, podDNSCluster},
		{"valid DNSClusterFirstWithHostNet without hostnetwork", false, corev1.DNSClusterFirstWithHostNet, podDNSCluster},
		{"valid DNSDefault without hostnetwork", false, corev1.DNSDefault, podDNSHost},
		{"valid DNSDefault with hostnetwork", true, corev1.DNSDefault, podDNSHost},
		{"DNSClusterFirst with hostnetwork, fallback to DNSDefault", true, corev1.DNSClusterFirst, podDNSHost},
		{"valid DNSNone", false, corev1.DNSNone, podDNSNone},
		{"invalid DNS policy: ClusterFirst, as the kubelet falls back", false, "invalidPolicy", podDNSCluster},
		{"unset: the API server's default, ClusterFirst", false, "", podDNSCluster},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{Spec: corev1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNetwork}}
		if got := podDNSTypeOf(pod); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.desc, got, tt.want)
		}
	}
}

// podDNSCase is one pod's DNS: its policy and dnsConfig, the node's
// settings, and what the pod gets.
type podDNSCase struct {
	desc        string
	hostNetwork bool
	policy      corev1.DNSPolicy
	dnsConfig   *corev1.PodDNSConfig
	cluster     ClusterDNS
	noHost      bool // the agent has no resolv.conf of its own
	podIP       string
	want        dnsConfig
	warnings    []string
	file        string // the rendered resolv.conf, when not empty
}

var (
	testCellDNS    = dnsConfig{Servers: []string{testHostNameserver}, Searches: []string{testHostDomain}, Options: []string{}}
	testClusterDNS = ClusterDNS{Servers: []string{"10.0.0.10"}, Domain: "kubernetes.io"}
)

const testNsSvc, testSvc = "testNS.svc.kubernetes.io", "svc.kubernetes.io"

func checkPodDNS(t *testing.T, tests []podDNSCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "test_pod", Namespace: "testNS"},
				Spec:       corev1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNetwork, DNSConfig: tt.dnsConfig},
			}
			h := testCellDNS
			if tt.noHost {
				h = dnsConfig{}
			}
			got, warnings := podDNS(pod, tt.cluster, h, !tt.noHost, tt.podIP)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("podDNS (-want +got):\n%s", diff)
			}
			var reasons []string
			for _, w := range warnings {
				reasons = append(reasons, w.Reason)
			}
			if diff := cmp.Diff(tt.warnings, reasons); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tt.file != "" {
				if diff := cmp.Diff(tt.file, string(got.render())); diff != "" {
					t.Errorf("resolv.conf (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestPodDNSPolicies is the kubelet's TestGetPodDNS, with kip's cases:
// the cluster DNS missing (the kubelet's fallback with its event) and the
// rendered file.
func TestPodDNSPolicies(t *testing.T) {
	host, cluster, nsSvc, svc := testCellDNS, testClusterDNS, testNsSvc, testSvc
	checkPodDNS(t, []podDNSCase{
		{
			desc:   "ClusterFirst: the cluster DNS only, the cluster search path before the cell's, ndots:5",
			policy: corev1.DNSClusterFirst, cluster: cluster,
			want: dnsConfig{Servers: []string{"10.0.0.10"}, Searches: []string{nsSvc, svc, "kubernetes.io", testHostDomain}, Options: []string{"ndots:5"}},
			file: "search testNS.svc.kubernetes.io svc.kubernetes.io kubernetes.io host.domain\nnameserver 10.0.0.10\noptions ndots:5\n",
		},
		{
			desc:   "ClusterFirst without a resolv.conf of the cell's",
			policy: corev1.DNSClusterFirst, cluster: cluster, noHost: true,
			want: dnsConfig{Servers: []string{"10.0.0.10"}, Searches: []string{nsSvc, svc, "kubernetes.io"}, Options: []string{"ndots:5"}},
		},
		{
			desc:   "ClusterFirst without a cluster domain: no cluster search path",
			policy: corev1.DNSClusterFirst, cluster: ClusterDNS{Servers: []string{"10.0.0.10"}},
			want: dnsConfig{Servers: []string{"10.0.0.10"}, Searches: []string{testHostDomain}, Options: []string{"ndots:5"}},
		},
		{
			desc:   "ClusterFirst with no cluster DNS falls back to Default, with the kubelet's event",
			policy: corev1.DNSClusterFirst, cluster: ClusterDNS{Domain: "kubernetes.io"},
			want:     host,
			warnings: []string{ReasonMissingClusterDNS},
			file:     "search host.domain\nnameserver 8.8.8.8\n",
		},
		{
			desc:   "ClusterFirst on the host network is Default",
			policy: corev1.DNSClusterFirst, hostNetwork: true, cluster: cluster,
			want: host,
		},
		{
			desc:   "ClusterFirstWithHostNet on the host network is the cluster's",
			policy: corev1.DNSClusterFirstWithHostNet, hostNetwork: true, cluster: cluster,
			want: dnsConfig{Servers: []string{"10.0.0.10"}, Searches: []string{nsSvc, svc, "kubernetes.io", testHostDomain}, Options: []string{"ndots:5"}},
		},
		{
			desc:   "Default: the cell's own",
			policy: corev1.DNSDefault, cluster: cluster,
			want: host,
		},
		{
			desc:   "Default without a resolv.conf of the cell's: the local resolver, as with the kubelet's --resolv-conf=\"\"",
			policy: corev1.DNSDefault, cluster: cluster, noHost: true, podIP: "10.0.0.7",
			want: dnsConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}},
			file: "search .\nnameserver 127.0.0.1\n",
		},
		{
			desc:   "Default without a resolv.conf, IPv6 pod",
			policy: corev1.DNSDefault, noHost: true, podIP: "fd00::7",
			want: dnsConfig{Servers: []string{"::1"}, Searches: []string{"."}},
		},
		{
			desc:   "DNSNone without DNSConfig should have empty DNS settings",
			policy: corev1.DNSNone, cluster: cluster,
			want: dnsConfig{},
		},
	})
	if got := string(dnsConfig{}.render()); got != "" {
		t.Errorf("an empty configuration (DNSNone) renders %q, want an empty file", got)
	}
}

// TestPodDNSConfig is the kubelet's TestGetPodDNSCustom: a pod's
// dnsConfig merged over each policy's.
func TestPodDNSConfig(t *testing.T) {
	cluster, nsSvc, svc := testClusterDNS, testNsSvc, testSvc
	custom := &corev1.PodDNSConfig{
		Nameservers: []string{"10.0.0.11"},
		Searches:    []string{"my.domain"},
		Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("3")}, {Name: "debug"}},
	}
	checkPodDNS(t, []podDNSCase{
		{
			desc:   "DNSNone with DNSConfig should have a merged DNS settings",
			policy: corev1.DNSNone, cluster: cluster,
			dnsConfig: &corev1.PodDNSConfig{
				Nameservers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("3")}, {Name: "debug"}},
			},
			want: dnsConfig{Servers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"}, Options: []string{"ndots:3", "debug"}},
			file: "search my.domain second.domain\nnameserver 203.0.113.1\noptions ndots:3 debug\n",
		},
		{
			desc:   "DNSClusterFirst with DNSConfig should have a merged DNS settings",
			policy: corev1.DNSClusterFirst, cluster: cluster, dnsConfig: custom,
			want: dnsConfig{Servers: []string{"10.0.0.10", "10.0.0.11"}, Searches: []string{nsSvc, svc, "kubernetes.io", testHostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}},
		},
		{
			desc:   "DNSClusterFirstWithHostNet with DNSConfig should have a merged DNS settings",
			policy: corev1.DNSClusterFirstWithHostNet, hostNetwork: true, cluster: cluster, dnsConfig: custom,
			want: dnsConfig{Servers: []string{"10.0.0.10", "10.0.0.11"}, Searches: []string{nsSvc, svc, "kubernetes.io", testHostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}},
		},
		{
			desc:   "DNSDefault with DNSConfig should have a merged DNS settings",
			policy: corev1.DNSDefault, cluster: cluster, dnsConfig: custom,
			want: dnsConfig{Servers: []string{testHostNameserver, "10.0.0.11"}, Searches: []string{testHostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}},
		},
		{
			desc:   "four nameservers are cut to three, with the kubelet's event",
			policy: corev1.DNSClusterFirst, cluster: ClusterDNS{Servers: []string{"10.0.0.10", "10.0.0.11"}, Domain: "kubernetes.io"},
			dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.12", "10.0.0.13"}},
			want:      dnsConfig{Servers: []string{"10.0.0.10", "10.0.0.11", "10.0.0.12"}, Searches: []string{nsSvc, svc, "kubernetes.io", testHostDomain}, Options: []string{"ndots:5"}},
			warnings:  []string{ReasonDNSConfigForming},
		},
	})
}
