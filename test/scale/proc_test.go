package scale

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name, status string
		want         Usage
		err          string
	}{
		{"both", "Name:\tvk\nVmPeak:\t 900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t12\n",
			Usage{RSS: 40 << 20, PeakRSS: 50 << 20}, ""},
		{"a kernel thread has neither", "Name:\tkthreadd\nState:\tS (sleeping)\n", Usage{}, "0 of 2 there"},
		{"not kB", "VmHWM:\t1 MB\nVmRSS:\t1 kB\n", Usage{}, "not a size in kB"},
		{"not a number", "VmHWM:\tmany kB\nVmRSS:\t1 kB\n", Usage{}, "reading VmHWM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatus(tt.status)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseStatus = %+v, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 70 ticks.
	const rest = " S 1 100 100 0 -1 4194560 2000 0 0 0 250 70 0 0 20 0 12 0 5000 1000000 9000 18446744073709551615"
	tests := []struct {
		name, stat string
		want       time.Duration
		err        string
	}{
		{"plain", "4242 (virtual-kubelet)" + rest, 3200 * time.Millisecond, ""},
		{"a command with spaces and parentheses", "4242 (a (b) c)" + rest, 3200 * time.Millisecond, ""},
		{"cut short", "4242 (vk) S 1 100", 0, "fields after the command"},
		{"no command", "4242 vk S", 0, "finding the end of the command"},
		{"not a number", "4242 (vk) S 1 100 100 0 -1 4194560 2000 0 0 0 x 70 0", 0, "reading utime and stime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.stat)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseStatCPU = %v, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("parseStatCPU = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReadUsageSelf reads this test's own process: it has a resident set
// and a peak at least as large (its CPU may still read 0 ticks).
func TestReadUsageSelf(t *testing.T) {
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS == 0 || u.PeakRSS < u.RSS || u.CPU < 0 {
		t.Errorf("ReadUsage(self) = %+v, want RSS > 0, PeakRSS ≥ RSS and CPU ≥ 0", u)
	}
}
