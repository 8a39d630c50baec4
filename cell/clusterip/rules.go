package clusterip

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Chains and tables the rules use. Every chain of ours starts with
// chainPrefix; nothing else is ever touched.
const (
	chainPrefix = "KIP-"
	// servicesChain is jumped to from OUTPUT in both tables: in nat it
	// sends each ClusterIP:port to its Service chain, in filter it
	// rejects ports without endpoints.
	servicesChain = "KIP-SERVICES"
	svcPrefix     = "KIP-SVC-"
	sepPrefix     = "KIP-SEP-"
	tableNat      = "nat"
	tableFilter   = "filter"
)

// tables are the tables the rules live in, in the order they are written.
var tables = []string{tableFilter, tableNat}

// hookRule is the rule, in each table, that sends locally generated
// traffic through servicesChain; restore inserts it once.
const hookRule = `-I OUTPUT -m comment --comment "kip cell: ClusterIP services" -j ` + servicesChain

// ruleset is a set of chains per table, each with its rules in order as
// iptables-restore lines ("-A CHAIN ...").
type ruleset map[string]map[string][]string

// render returns the chains that serve services.
func render(services []Service) ruleset {
	rs := ruleset{tableNat: {servicesChain: nil}, tableFilter: {servicesChain: nil}}
	for i := range services {
		s := &services[i]
		ips := ipv4s(s.ClusterIPs)
		for _, p := range s.Ports {
			proto := strings.ToLower(p.Protocol)
			if proto != "tcp" && proto != "udp" {
				continue
			}
			name := s.Key() // kube-proxy's service port name: ns/name[:port]
			if p.Name != "" {
				name += ":" + p.Name
			}
			match := fmt.Sprintf("-p %s -m %s --dport %d", proto, proto, p.Port)
			eps := endpoints(p.Endpoints)
			if len(eps) == 0 {
				for _, ip := range ips {
					rs.add(tableFilter, servicesChain, fmt.Sprintf("-d %s/32 %s -m comment --comment %q -j REJECT --reject-with icmp-port-unreachable",
						ip, match, name+" has no endpoints"))
				}
				continue
			}
			id := name + "/" + proto
			svc := chainName(svcPrefix, id)
			for _, ip := range ips {
				rs.add(tableNat, servicesChain, fmt.Sprintf("-d %s/32 %s -m comment --comment %q -j %s", ip, match, name+" cluster IP", svc))
			}
			rs.nat(svc)
			seps := make([]string, len(eps))
			for i, ep := range eps {
				seps[i] = chainName(sepPrefix, id+"/"+ep)
			}
			if s.AffinitySeconds > 0 {
				for _, sep := range seps {
					rs.add(tableNat, svc, fmt.Sprintf("-m recent --name %s --rcheck --seconds %d --reap -j %s", sep, s.AffinitySeconds, sep))
				}
			}
			for i, sep := range seps {
				if n := len(seps) - i; n > 1 {
					rs.add(tableNat, svc, fmt.Sprintf("-m statistic --mode random --probability %0.10f -j %s", 1/float64(n), sep))
				} else {
					rs.add(tableNat, svc, "-j "+sep)
				}
				set := ""
				if s.AffinitySeconds > 0 {
					set = fmt.Sprintf(" -m recent --name %s --set", sep)
				}
				rs.add(tableNat, sep, fmt.Sprintf("-p %s -m comment --comment %q%s -j DNAT --to-destination %s", proto, name, set, eps[i]))
			}
		}
	}
	return rs
}

// nat declares an empty chain in the nat table.
func (rs ruleset) nat(chain string) {
	if _, ok := rs[tableNat][chain]; !ok {
		rs[tableNat][chain] = []string{}
	}
}

// add appends rule to chain in table.
func (rs ruleset) add(table, chain, rule string) {
	rs[table][chain] = append(rs[table][chain], "-A "+chain+" "+rule)
}

// ipv4s are the IPv4 addresses of ips, in their order.
func ipv4s(ips []string) []string {
	var out []string
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			out = append(out, a.String())
		}
	}
	return out
}

// endpoints are the IPv4 endpoints as ip:port, sorted, without repeats.
func endpoints(eps []Endpoint) []string {
	out := make([]string, 0, len(eps))
	for _, ep := range eps {
		a, err := netip.ParseAddr(ep.IP)
		if err != nil || !a.Is4() || ep.Port <= 0 || ep.Port > 65535 {
			continue
		}
		out = append(out, netip.AddrPortFrom(a, uint16(ep.Port)).String())
	}
	slices.SortFunc(out, func(a, b string) int {
		return netip.MustParseAddrPort(a).Compare(netip.MustParseAddrPort(b))
	})
	return slices.Compact(out)
}

// chainName is prefix and 16 characters of the hash of id, as kube-proxy
// names its chains (a chain name has at most 28 characters).
func chainName(prefix, id string) string {
	h := sha256.Sum256([]byte(id))
	return prefix + base32.StdEncoding.EncodeToString(h[:])[:16]
}

// restoreInput is the iptables-restore --noflush input that turns have
// into want: it declares (and so flushes) and fills every chain of want
// that is new or whose rules differ, declares and deletes every chain of
// have that want lacks, and inserts the OUTPUT rule in each table that is
// not hooked. With unknown set, have's chains are known by name only and
// every chain of want is written. Nothing to do is an empty input.
func restoreInput(have, want ruleset, unknown bool, hooked map[string]bool) []byte {
	var b bytes.Buffer
	for _, table := range tables {
		var decls, rules, deletes []string
		for _, chain := range slices.Sorted(maps.Keys(want[table])) {
			lines := want[table][chain]
			if old, ok := have[table][chain]; ok && !unknown && slices.Equal(old, lines) {
				continue
			}
			decls = append(decls, ":"+chain+" - [0:0]")
			rules = append(rules, lines...)
		}
		for _, chain := range slices.Sorted(maps.Keys(have[table])) {
			if _, ok := want[table][chain]; !ok {
				decls = append(decls, ":"+chain+" - [0:0]")
				deletes = append(deletes, "-X "+chain)
			}
		}
		if !hooked[table] {
			rules = append(rules, hookRule)
		}
		if len(decls)+len(rules) == 0 {
			continue
		}
		b.WriteString("*" + table + "\n")
		for _, l := range slices.Concat(decls, rules, deletes) {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

// parseSaved reads iptables-save output: our chains per table (rules
// unknown) and whether each table's OUTPUT jumps to servicesChain.
func parseSaved(out []byte) (have ruleset, hooked map[string]bool) {
	have = ruleset{tableNat: {}, tableFilter: {}}
	hooked = map[string]bool{}
	table := ""
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case have[table] == nil:
		case strings.HasPrefix(line, ":"+chainPrefix):
			chain, _, _ := strings.Cut(line[1:], " ")
			have[table][chain] = nil
		case strings.HasPrefix(line, "-A OUTPUT ") && strings.HasSuffix(line, " -j "+servicesChain):
			hooked[table] = true
		}
	}
	return have, hooked
}
