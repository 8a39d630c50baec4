package share

import (
	"net/netip"
	"testing"
)

func TestRefused(t *testing.T) {
	tests := []struct {
		addr    string
		refused bool
	}{
		{"10.0.3.7", false},
		{"192.168.1.20", false},
		{"203.0.113.9", false},
		{"fd00::5", false},
		{"2001:db8::1", false},
		{"127.0.0.1", true},
		{"127.3.4.5", true},
		{"::1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"169.254.169.254", true}, // EC2's, Compute Engine's and Azure's metadata
		{"169.254.170.2", true},   // ECS's credentials endpoint
		{"fe80::1", true},
		{"fd00:ec2::254", true}, // EC2's IPv6 metadata
		{"fd00:ec2::23", false},
		{"::ffff:127.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"224.0.0.1", true},
		{"ff02::1", true},
		{"168.63.129.16", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			why := Refused(netip.MustParseAddr(tt.addr))
			if (why != "") != tt.refused {
				t.Errorf("Refused(%s) = %q, want refused %v", tt.addr, why, tt.refused)
			}
		})
	}
	if Refused(netip.Addr{}) == "" {
		t.Error("the zero Addr is not refused")
	}
}
