package ec2sim

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

// ---- GetConsoleOutput ----

type getConsoleOutputResponse struct {
	XMLName xml.Name `xml:"GetConsoleOutputResponse"`
	responseMeta
	InstanceID string `xml:"instanceId"`
	Timestamp  string `xml:"timestamp,omitempty"`
	// Output is base64, as EC2 sends it; absent until the instance has
	// written any.
	Output string `xml:"output,omitempty"`
}

// getConsoleOutput answers an instance's serial console: nothing while it
// is pending, then the boot log of a Debian cloud image running the
// deploy/aws recipe up to now: kip-cell started, or, for an instance whose
// agent is silenced (SilenceAgents), the unit failing. Element names follow
// the SDK's deserializer (instanceId, timestamp, output).
func (s *Server) getConsoleOutput(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	id := f.get("InstanceId")
	if id == "" {
		return nil, clientError(codeMissingParameter, "The request must contain the parameter InstanceId")
	}
	now := s.now()
	ins, err := s.lookup([]string{id}, now)
	if err != nil {
		return nil, err
	}
	in := ins[0]
	resp := &getConsoleOutputResponse{InstanceID: in.id}
	if text := consoleOf(in, now); text != "" {
		resp.Output = base64.StdEncoding.EncodeToString([]byte(text))
		resp.Timestamp = now.UTC().Format(timeLayout)
	}
	return resp, nil
}

// consoleOf is what an instance's console shows at now.
func consoleOf(in *instance, now time.Time) string {
	if in.state == statePending {
		return ""
	}
	var b strings.Builder
	line := func(after time.Duration, format string, args ...any) {
		fmt.Fprintf(&b, "[%11.6f] "+format+"\n", append([]any{after.Seconds()}, args...)...)
	}
	line(0, "Linux version 6.1.0-28-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1")
	line(1200*time.Millisecond, "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode")
	fmt.Fprintf(&b, "cloud-init[412]: Cloud-init v. 22.4.2 running 'init' at %s. Up 4.12 seconds.\n", in.launchTime.UTC().Format(time.RFC1123))
	fmt.Fprintf(&b, "cloud-init[412]: ci-info: | ens5 | True | %s | 255.255.240.0 | global |\n", in.cell.Address)
	b.WriteString("cloud-init[640]: Cloud-init v. 22.4.2 running 'modules:config' at " + in.launchTime.UTC().Format(time.RFC1123) + ".\n")
	switch {
	case in.cell.Silent:
		b.WriteString("cloud-init[702]: kip-cell: sha256 of /usr/local/bin/kip-cell does not match the bootstrap's; refusing to start it\n")
		b.WriteString("cloud-init[702]: " + in.launchTime.UTC().Format("2006-01-02 15:04:05,000") +
			" - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)\n")
		b.WriteString("systemd[1]: kip-cell.service: Failed with result 'exit-code'.\n")
		b.WriteString("systemd[1]: Failed to start kip-cell.service - Kip cell agent.\n")
	case in.cell.AgentStarted:
		b.WriteString("systemd[1]: Starting kip-cell.service - Kip cell agent...\n")
		b.WriteString("systemd[1]: Started kip-cell.service - Kip cell agent.\n")
		fmt.Fprintf(&b, "cloud-init[760]: Cloud-init v. 22.4.2 finished. Datasource DataSourceEc2Local. Up %.2f seconds\n",
			max(now.Sub(in.launchTime), 0).Seconds())
	default:
		b.WriteString("cloud-init[702]: Reading package lists...\n")
	}
	return b.String()
}
