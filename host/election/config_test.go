package election

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/setting"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{name: "defaults", change: func(*Config) {}},
		{name: "enabled with a lease name and identity", change: func(c *Config) { c.Enabled, c.LeaseName, c.Identity = true, "kip-a", "pod-0" }},
		{name: "namespace", change: func(c *Config) { c.Namespace = "Kip_System" }, want: []string{"namespace"}},
		{name: "no namespace", change: func(c *Config) { c.Namespace = "" }, want: []string{"namespace"}},
		{name: "lease name", change: func(c *Config) { c.LeaseName = "kip/a" }, want: []string{"leaseName"}},
		{name: "identity spaces", change: func(c *Config) { c.Identity = " pod" }, want: []string{"identity"}},
		{name: "retry period zero", change: func(c *Config) { c.RetryPeriod = 0 }, want: []string{"retryPeriod"}},
		{name: "renew deadline within the jitter", change: func(c *Config) { c.RenewDeadline = 1200 * time.Millisecond }, want: []string{"renewDeadline"}},
		{name: "lease not longer than the deadline", change: func(c *Config) { c.LeaseDuration = c.RenewDeadline }, want: []string{"leaseDuration"}},
		{name: "lease under a second", change: func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 900*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
		}, want: []string{"leaseDuration"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			if diff := cmp.Diff(tt.want, setting.Keys(c.Validate())); diff != "" {
				t.Errorf("keys of Validate's errors (-want +got):\n%s\n%v", diff, c.Validate())
			}
		})
	}
}

// The defaults bound a takeover after a kill -9 to leaseDuration plus two
// tries at their longest (2.2 × retryPeriod each, client-go's jitter),
// under the 15 s, and let a failing leader give up before a
// standby may take the Lease.
func TestDefaultsBoundTheTakeover(t *testing.T) {
	c := DefaultConfig()
	if worst := c.LeaseDuration + 2*time.Duration((1+jitterFactor)*float64(c.RetryPeriod)); worst >= 15*time.Second {
		t.Errorf("worst takeover %s, want under 15s", worst)
	}
	if giveUp := c.RetryPeriod + c.RenewDeadline; giveUp >= c.LeaseDuration {
		t.Errorf("a leader gives up %s after its last renewal, not before leaseDuration %s", giveUp, c.LeaseDuration)
	}
}

func TestForNode(t *testing.T) {
	t.Setenv("POD_NAME", "")
	c := DefaultConfig().ForNode("edge")
	if c.LeaseName != "kip-edge" {
		t.Errorf("LeaseName = %q, want kip-edge", c.LeaseName)
	}
	other := DefaultConfig().ForNode("edge")
	if c.Identity == "" || c.Identity == other.Identity || !strings.Contains(c.Identity, "_") {
		t.Errorf("identities %q and %q: want the host name and a random suffix, different", c.Identity, other.Identity)
	}
	t.Setenv("POD_NAME", "kip-7d9f-abcde")
	if got := DefaultConfig().ForNode("edge").Identity; got != "kip-7d9f-abcde" {
		t.Errorf("Identity = %q, want $POD_NAME", got)
	}
	set := Config{LeaseName: "mine", Identity: "me"}.ForNode("edge")
	if set.LeaseName != "mine" || set.Identity != "me" {
		t.Errorf("ForNode changed set values: %+v", set)
	}
}
