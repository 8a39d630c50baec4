package sysctl

import "testing"

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"net.ipv4.ip_forward":              "net.ipv4.ip_forward",
		"net/ipv4/ip_forward":              "net.ipv4.ip_forward",
		"net/ipv4/conf/eth0.100/rp_filter": "net.ipv4.conf.eth0/100.rp_filter",
		"net.ipv4.conf.eth0/100.rp_filter": "net.ipv4.conf.eth0/100.rp_filter",
		"kernel":                           "kernel",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidatePattern(t *testing.T) {
	for p, want := range map[string]string{
		"net.core.somaxconn": "",
		"net.core.*":         "",
		"kernel.msg*":        "",
		"kernel.sem":         "",
		"fs.mqueue.*":        "",
		"kernel.panic":       `the sysctls "kernel.panic" are not known to be namespaced`,
		"vm.*":               `the sysctls "vm." are not known to be namespaced`,
		"Net.Core":           `sysctl "Net.Core" must have at most 253 characters and match regex ` + patternRE.String(),
	} {
		got := ""
		if err := ValidatePattern(p); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("ValidatePattern(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestNamespaceOf(t *testing.T) {
	for name, want := range map[string]Namespace{
		"net.ipv4.tcp_syncookies": NetNamespace, "kernel.shm_rmid_forced": IPCNamespace, "kernel.msgmax": IPCNamespace,
		"fs.mqueue.msg_max": IPCNamespace, "kernel.hostname": UnknownNamespace, "vm.swappiness": UnknownNamespace,
	} {
		if got := NamespaceOf(name); got != want {
			t.Errorf("NamespaceOf(%q) = %q, want %q", name, got, want)
		}
	}
	for _, s := range Safe {
		if NamespaceOf(s) == UnknownNamespace {
			t.Errorf("safe sysctl %s has no namespace", s)
		}
	}
}
