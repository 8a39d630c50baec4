package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Usage is what /proc says of one process: its resident memory now and at
// its peak, and the CPU time it has used.
type Usage struct {
	// RSS is VmRSS, PeakRSS VmHWM (the high-water mark since the process
	// started), in bytes.
	RSS, PeakRSS uint64
	// CPU is utime + stime.
	CPU time.Duration
}

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 a second
// on every Linux architecture Kip builds for.
const clockTick = 10 * time.Millisecond

// ReadUsage reads the Usage of process pid from /proc.
func ReadUsage(pid int) (Usage, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("reading the stat of process %d: %w", pid, err)
	}
	u, err := parseStatus(string(status))
	if err != nil {
		return Usage{}, fmt.Errorf("parsing the status of process %d: %w", pid, err)
	}
	if u.CPU, err = parseStatCPU(string(stat)); err != nil {
		return Usage{}, fmt.Errorf("parsing the stat of process %d: %w", pid, err)
	}
	return u, nil
}

// parseStatus returns VmRSS and VmHWM of a /proc/<pid>/status ("VmHWM:
// 123 kB"); both must be there.
func parseStatus(status string) (Usage, error) {
	var u Usage
	var found int
	for line := range strings.Lines(status) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return Usage{}, fmt.Errorf("reading %s: %q is not a size in kB", name, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return Usage{}, fmt.Errorf("reading %s: %w", name, err)
		}
		if name == "VmRSS" {
			u.RSS = kb << 10
		} else {
			u.PeakRSS = kb << 10
		}
		found++
	}
	if found != 2 {
		return Usage{}, fmt.Errorf("finding VmRSS and VmHWM: %d of 2 there", found)
	}
	return u, nil
}

// parseStatCPU returns utime + stime of a /proc/<pid>/stat line: the 14th
// and 15th fields, counted after the command, which is in parentheses and
// may hold spaces and parentheses itself.
func parseStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndex(stat, ")")
	if end < 0 {
		return 0, fmt.Errorf("finding the end of the command in %q", stat)
	}
	// After ") ": state is field 3, so utime (14) and stime (15) are the
	// 12th and 13th.
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("reading utime and stime: %d fields after the command, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading utime and stime: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
