package pod

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The pod's /etc/resolv.conf, ported from the kubelet's
// pkg/kubelet/network/dns/dns.go (v1.36), function for function, and
// rendered as containerd's CRI plugin writes it (parseDNSOptions in
// internal/cri/server/podsandbox/sandbox_run_linux.go). Where the
// kubelet iterates over a map (options), the order here is fixed: the
// first place an option appears.

// Limits of a resolv.conf (pkg/apis/core/validation: MaxDNSNameservers,
// MaxDNSSearchPaths, MaxDNSSearchListChars).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	// maxResolvConfLength bounds the cell's resolv.conf the agent reads.
	maxResolvConfLength = 10 << 20
)

// defaultDNSOptions are a ClusterFirst pod's options.
var defaultDNSOptions = []string{"ndots:5"}

// ClusterDNS is the node's DNS settings, from the host (cell/api's
// ClusterDNS): a kubelet's --cluster-dns and --cluster-domain.
type ClusterDNS struct {
	// Servers are the cluster DNS servers; empty: none known.
	Servers []string
	// Domain is the cluster domain ("cluster.local"); empty: none.
	Domain string
}

// dnsConfig is a resolv.conf: the CRI's DNSConfig.
type dnsConfig struct {
	Servers, Searches, Options []string
}

// render writes c as containerd does: the search line, one nameserver
// line per server, the options line, each only when not empty.
func (c dnsConfig) render() []byte {
	var b strings.Builder
	if len(c.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.Searches, " "))
	}
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.Options, " "))
	}
	return []byte(b.String())
}

// warning is an event the kubelet records about the pod's DNS.
type warning struct{ Reason, Message string }

// Reasons of the DNS warnings, the kubelet's.
const (
	ReasonMissingClusterDNS = "MissingClusterDNS"
	ReasonDNSConfigForming  = "DNSConfigForming"
)

// missingClusterDNS says what the kubelet says, naming where kip looks.
var missingClusterDNS = fmt.Sprintf("kip has no cluster DNS address (node.clusterDNS is empty and "+
	"kube-system/kube-dns has no ClusterIP) and cannot create Pod using %q policy. Falling back to %q policy.",
	corev1.DNSClusterFirst, corev1.DNSDefault)

type podDNSType int

const (
	podDNSCluster podDNSType = iota
	podDNSHost
	podDNSNone
)

// podDNSTypeOf is the kubelet's getPodDNSType. A policy the API server
// would have refused counts as ClusterFirst.
func podDNSTypeOf(pod *corev1.Pod) podDNSType {
	switch pod.Spec.DNSPolicy {
	case corev1.DNSNone:
		return podDNSNone
	case corev1.DNSClusterFirstWithHostNet:
		return podDNSCluster
	case corev1.DNSClusterFirst:
		if !pod.Spec.HostNetwork {
			return podDNSCluster
		}
		// A host-network pod falls back to Default.
		return podDNSHost
	case corev1.DNSDefault:
		return podDNSHost
	}
	return podDNSCluster
}

// podDNS is the kubelet's GetPodDNS: the pod's resolver configuration
// from its dnsPolicy and dnsConfig, the cluster's DNS settings and host,
// the cell's own resolv.conf (hostKnown false: the agent was given none,
// the kubelet's --resolv-conf="", which means the local resolver). podIP
// picks the loopback address of that case. It also returns the warnings
// the kubelet records as events.
func podDNS(pod *corev1.Pod, cluster ClusterDNS, host dnsConfig, hostKnown bool, podIP string) (dnsConfig, []warning) {
	var warnings []warning
	cfg := host
	switch podDNSTypeOf(pod) {
	case podDNSNone:
		cfg = dnsConfig{}
	case podDNSCluster:
		if len(cluster.Servers) > 0 {
			// The cluster DNS is the only nameserver: it forwards what it
			// cannot answer itself.
			cfg.Servers = append([]string(nil), cluster.Servers...)
			cfg.Searches = clusterSearches(cluster.Domain, host.Searches, pod.Namespace)
			cfg.Options = append([]string(nil), defaultDNSOptions...)
			break
		}
		warnings = append(warnings, warning{ReasonMissingClusterDNS, missingClusterDNS})
		cfg = hostDNS(host, hostKnown, podIP)
	case podDNSHost:
		cfg = hostDNS(host, hostKnown, podIP)
	}
	if pod.Spec.DNSConfig != nil {
		cfg = appendDNSConfig(cfg, pod.Spec.DNSConfig)
	}
	return fitLimits(cfg, &warnings), warnings
}

// hostDNS is the kubelet's podDNSHost case: the cell's own configuration,
// or, when it has none, the local resolver with an empty search path.
func hostDNS(host dnsConfig, hostKnown bool, podIP string) dnsConfig {
	if hostKnown {
		return host
	}
	loopback := "127.0.0.1"
	if ip := net.ParseIP(podIP); ip != nil && ip.To4() == nil {
		loopback = "::1"
	}
	return dnsConfig{Servers: append(host.Servers, loopback), Searches: []string{"."}, Options: host.Options}
}

// clusterSearches is the kubelet's generateSearchesForDNSClusterFirst:
// <ns>.svc.<domain> svc.<domain> <domain>, then the cell's own.
func clusterSearches(domain string, hostSearches []string, namespace string) []string {
	if domain == "" {
		return hostSearches
	}
	cluster := []string{namespace + ".svc." + domain, "svc." + domain, domain}
	return omitDuplicates(append(cluster, hostSearches...))
}

func omitDuplicates(strs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range strs {
		if !seen[s] {
			out = append(out, s)
			seen[s] = true
		}
	}
	return out
}

// appendDNSConfig is the kubelet's: the pod's dnsConfig nameservers and
// searches after the policy's (duplicates dropped), its options merged
// over the policy's.
func appendDNSConfig(cfg dnsConfig, pod *corev1.PodDNSConfig) dnsConfig {
	cfg.Servers = omitDuplicates(append(cfg.Servers, pod.Nameservers...))
	cfg.Searches = omitDuplicates(append(cfg.Searches, pod.Searches...))
	cfg.Options = mergeDNSOptions(cfg.Options, pod.Options)
	return cfg
}

// mergeDNSOptions is the kubelet's: the pod's options override those of
// the same name; "name" without a value, else "name:value".
func mergeDNSOptions(existing []string, pod []corev1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, op := range existing {
		name, value, _ := strings.Cut(op, ":")
		set(name, value)
	}
	for _, op := range pod {
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		set(op.Name, value)
	}
	out := []string{}
	for _, name := range names {
		if values[name] == "" {
			out = append(out, name)
		} else {
			out = append(out, name+":"+values[name])
		}
	}
	return out
}

// fitLimits is the kubelet's formDNSConfigFitsLimits: at most three
// nameservers; at most 32 search paths, none longer than 253 characters,
// and a search line of at most 2048. Each cut is a DNSConfigForming
// warning.
func fitLimits(cfg dnsConfig, warnings *[]warning) dnsConfig {
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		*warnings = append(*warnings, warning{ReasonDNSConfigForming, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(cfg.Servers, " ")})
	}
	search, exceeded := cfg.Searches, false
	if len(search) > maxDNSSearchPaths {
		search, exceeded = search[:maxDNSSearchPaths], true
	}
	var kept []string
	for _, s := range search {
		if len(s) > validation.DNS1123SubdomainMaxLength {
			exceeded = true
			continue
		}
		kept = append(kept, s)
	}
	search = kept
	if n := len(strings.Join(search, " ")); n > maxDNSSearchListChars {
		cut, cutLen := 0, 0
		for i := len(search) - 1; i >= 0; i-- {
			cutLen += len(search[i]) + 1
			cut++
			if n-cutLen <= maxDNSSearchListChars {
				break
			}
		}
		search, exceeded = search[:len(search)-cut], true
	}
	if exceeded {
		*warnings = append(*warnings, warning{ReasonDNSConfigForming, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(search, " ")})
	}
	cfg.Searches = search
	return cfg
}

// parseResolvConf is the kubelet's: nameserver lines accumulate, the last
// search line wins (a trailing dot dropped, "." ignored), options lines
// accumulate, a later option replacing one of the same name.
func parseResolvConf(data []byte) (dnsConfig, error) {
	if len(data) > maxResolvConfLength {
		return dnsConfig{}, fmt.Errorf("resolv.conf is longer than %d bytes", maxResolvConfLength)
	}
	cfg := dnsConfig{Servers: []string{}, Searches: []string{}, Options: []string{}}
	var errs []error
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		fields := strings.Fields(trimmed)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) >= 2 {
				cfg.Servers = append(cfg.Servers, fields[1])
			} else {
				errs = append(errs, errors.New("nameserver list is empty"))
			}
		case "search":
			cfg.Searches = []string{}
			for _, s := range fields[1:] {
				if s != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			cfg.Options = appendOptions(cfg.Options, fields[1:]...)
		}
	}
	return cfg, errors.Join(errs...)
}

// appendOptions is the kubelet's: a later option replaces an earlier one
// of the same name (here in the earlier one's place).
func appendOptions(options []string, add ...string) []string {
	out := slices.Clone(options)
	for _, op := range add {
		name, _, _ := strings.Cut(op, ":")
		replaced := false
		for i, have := range out {
			if n, _, _ := strings.Cut(have, ":"); n == name {
				out[i], replaced = op, true
				break
			}
		}
		if !replaced {
			out = append(out, op)
		}
	}
	return out
}
