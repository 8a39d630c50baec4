// Package sysctl is the kubelet's knowledge of sysctl names, shared by the
// host (which admits or rejects a pod by its sysctls) and the cell agent
// (which sets them): both sides must read a name the same way. It holds
// the name normalization (k8s.io/component-helpers/node/util/sysctl), the
// kernel namespace of a sysctl, the kubelet's safe set
// (pkg/kubelet/sysctl) and the check of an allow-list pattern. It imports
// only the standard library.
package sysctl

import (
	"fmt"
	"regexp"
	"strings"
)

// Namespace is the kernel namespace a sysctl belongs to.
type Namespace string

// Namespaces.
const (
	IPCNamespace     = Namespace("IPC")
	NetNamespace     = Namespace("Net")
	UnknownNamespace = Namespace("")
)

// Safe is the kubelet's safe set, which every pod may set. The kubelet
// leaves out those its node's kernel does not namespace (the newest need
// 4.15); which kernel a cell runs is not known before it runs.
var Safe = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
}

// Normalize turns a name written with slashes
// ("net/ipv4/conf/eth0.100/rp_filter") into the dotted form
// ("net.ipv4.conf.eth0/100.rp_filter"); a dotted name stays as it is.
func Normalize(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}

// NamespaceOf is the namespace of a (normalized) sysctl or prefix.
func NamespaceOf(name string) Namespace {
	switch name {
	case "kernel.sem", "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
		"kernel.shm", "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.msg":
		return IPCNamespace
	}
	switch {
	case strings.HasPrefix(name, "net."):
		return NetNamespace
	case strings.HasPrefix(name, "fs.mqueue."):
		return IPCNamespace
	}
	return UnknownNamespace
}

// Pattern splits an allow-list entry into its namespace and the sysctl or,
// for "prefix*", the prefix.
func Pattern(p string) (ns Namespace, name string, prefixed bool) {
	name = Normalize(p)
	if i := strings.IndexByte(name, '*'); i >= 0 {
		name, prefixed = name[:i], true
	}
	return NamespaceOf(name), name, prefixed
}

// patternRE is the API's sysctl pattern (SysctlContainSlashPatternFmt).
var patternRE = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

// ValidatePattern is the kubelet's check of an allowed unsafe sysctl
// (sysctl.NewAllowlist), with its messages: a valid pattern of a
// namespaced sysctl.
func ValidatePattern(p string) error {
	if len(p) > 253 || !patternRE.MatchString(p) {
		return fmt.Errorf("sysctl %q must have at most 253 characters and match regex %s", p, patternRE)
	}
	if ns, name, _ := Pattern(p); ns == UnknownNamespace {
		return fmt.Errorf("the sysctls %q are not known to be namespaced", name)
	}
	return nil
}
