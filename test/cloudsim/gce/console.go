package gcesim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// serialBuffer is how much of a serial port's output GCE keeps (1 MB):
// older output is gone, and a start before it is moved up.
const serialBuffer = 1 << 20

// serialPortJSON is the SerialPortOutput resource as GCE writes it.
type serialPortJSON struct {
	Kind     string `json:"kind"`
	Contents string `json:"contents"`
	Start    string `json:"start"`
	Next     string `json:"next"`
	SelfLink string `json:"selfLink"`
}

// getSerialPortOutput answers instances.getSerialPortOutput: port 1 (the
// default) holds the instance's boot log (serialOutput), ports 2 to 4
// nothing. start is a byte position (a negative one counts from the
// end); the answer's start is where its contents begin, moved up past
// what the 1 MB buffer lost or back to the end, and next is where the
// following call starts.
func (s *Server) getSerialPortOutput(q request) (any, error) {
	zone, name := q.zone(), q.args[1]
	v := q.r.URL.Query()
	port := 1
	if p := v.Get("port"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 4 {
			return nil, invalid("port", p, "Must be greater than or equal to 1 and less than or equal to 4.")
		}
		port = n
	}
	var start int64
	if p := v.Get("start"); p != "" {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, invalid("start", p, "Must be an integer.")
		}
		start = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	in := s.live(zone, name, now)
	if in == nil {
		return nil, notFound(s.instancePath(zone, name))
	}
	var all string
	if port == 1 {
		all = serialOutput(in, now)
	}
	end := int64(len(all))
	oldest := max(end-serialBuffer, 0)
	if start < 0 {
		start = end + start
	}
	start = min(max(start, oldest), end)
	return serialPortJSON{
		Kind: "compute#serialPortOutput", Contents: all[start:], Start: strconv.FormatInt(start, 10),
		Next:     strconv.FormatInt(end, 10),
		SelfLink: apiBase + s.instancePath(zone, name) + "/serialPort?port=" + strconv.Itoa(port),
	}, nil
}

// serialOutput is what an instance's first serial port shows at now: the
// boot log of a Debian image from the moment it runs (nothing while it
// is PROVISIONING or STAGING), the guest agent running the startup-script
// of its metadata if it has one (deploy/gce/startup.sh), and the shutdown
// once it is deleted.
func serialOutput(in *instance, now time.Time) string {
	if now.Before(in.runningAt) {
		return ""
	}
	var b strings.Builder
	line := func(after time.Duration, format string, args ...any) {
		fmt.Fprintf(&b, "[%11.6f] "+format+"\n", append([]any{after.Seconds()}, args...)...)
	}
	b.WriteString("SeaBIOS (version 1.8.2-google)\nBooting from Hard Disk 0...\n")
	line(0, "Linux version 6.1.0-27-cloud-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1")
	line(0, "Command line: BOOT_IMAGE=/boot/vmlinuz-6.1.0-27-cloud-amd64 root=PARTUUID=0f1a4c7e-01 ro console=ttyS0,115200")
	line(1100*time.Millisecond, "EXT4-fs (sda1): mounted filesystem with ordered data mode. Quota mode: none.")
	line(2300*time.Millisecond, "systemd[1]: Hostname set to <%s>.", in.key.name)
	fmt.Fprintf(&b, "%s google_guest_agent[520]: GCE Agent Started (version 20261001.00).\n", logTime(in.runningAt))
	if script := string(metadataItem(in.body, "startup-script")); script != "" {
		fmt.Fprintf(&b, "%s google_metadata_script_runner[612]: Starting startup scripts (version 20261001.00).\n", logTime(in.runningAt))
		fmt.Fprintf(&b, "%s google_metadata_script_runner[612]: Found startup-script in metadata.\n", logTime(in.runningAt))
		if strings.Contains(script, "kip-cell") {
			fmt.Fprintf(&b, "%s google_metadata_script_runner[612]: startup-script: kip-cell boot: starting kip-cell.service\n", logTime(in.runningAt))
		}
		fmt.Fprintf(&b, "%s google_metadata_script_runner[612]: startup-script exit status 0\n", logTime(in.runningAt))
		fmt.Fprintf(&b, "%s google_metadata_script_runner[612]: Finished running startup scripts.\n", logTime(in.runningAt))
	}
	fmt.Fprintf(&b, "\nDebian GNU/Linux 12 %s ttyS0\n\n%s login: \n", in.key.name, in.key.name)
	if in.stopping && !now.Before(in.stopAt) {
		fmt.Fprintf(&b, "%s systemd[1]: Stopping kip-cell.service - Kip cell agent...\n", logTime(in.stopAt))
		line(in.stopAt.Sub(in.runningAt)+time.Second, "reboot: Power down")
	}
	return b.String()
}

// logTime writes t as the journal on a serial console does.
func logTime(t time.Time) string { return t.UTC().Format("Jan 02 15:04:05") }
