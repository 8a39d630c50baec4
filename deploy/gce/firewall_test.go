package gce

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestFirewallRule: the rule opens TCP 6421 only, from kip's address only
// (a single address becomes a /32), to the cells' tag only.
func TestFirewallRule(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		want    []string // parts of the command
		wantErr string
	}{
		{name: "an address", env: []string{"PROJECT=p", "NETWORK=kip", "KIP_ADDRESS=10.10.0.2"},
			want: []string{"gcloud compute firewall-rules create kip-agent-from-host", "--project p", "--network kip", "--direction INGRESS",
				"--rules tcp:6421 ", "--source-ranges 10.10.0.2/32 ", "--target-tags kip-cell "}},
		{name: "a range and a tag", env: []string{"PROJECT=p", "NETWORK=kip", "KIP_ADDRESS=10.4.0.0/14", "CELL_TAG=cells"},
			want: []string{"--source-ranges 10.4.0.0/14 ", "--target-tags cells "}},
		{name: "no address", env: []string{"PROJECT=p", "NETWORK=kip"}, wantErr: "KIP_ADDRESS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "firewall.sh")
			cmd.Env = append(append(os.Environ(), "DRY_RUN=1"), tt.env...)
			out, err := cmd.CombinedOutput()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(string(out), tt.wantErr) {
					t.Errorf("err %v, output %q; want a refusal naming %s", err, out, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("firewall.sh: %v: %s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("command %q lacks %q", out, w)
				}
			}
		})
	}
}
