package framework

import (
	"strings"
	"time"
)

// withCellsSections adds opts's cells.warmPool and cells.choices sections
// and its other cells settings (KipOptions.WarmPool, Choices, Cells) to
// kip's config.
func withCellsSections(config string, opts KipOptions) string {
	if opts.Cells != "" {
		config = strings.Replace(config, "cells:\n", "cells:\n"+indent(opts.Cells, "  "), 1)
	}
	for _, s := range []struct{ key, yaml string }{{"warmPool", opts.WarmPool}, {"choices", opts.Choices}} {
		if s.yaml != "" {
			config = strings.Replace(config, "cells:\n", "cells:\n  "+s.key+":\n"+indent(s.yaml, "    "), 1)
		}
	}
	return config
}

// UnavailableTTL is how long kip skips an offering that ran out of
// capacity in the e2e runs (3 minutes by default): short, so that a test
// that injects a shortage can wait for it to pass before the next test.
const UnavailableTTL = 5 * time.Second

// VolumeRefreshInterval is how often kip resolves a running pod's
// volumes again in the e2e runs (a minute by default): short, so that a
// test sees a changed Secret reach the container in seconds.
const VolumeRefreshInterval = 2 * time.Second

// AgentTimeout is how long kip waits for a cell's agent to answer once
// its instance runs in the e2e runs (10 minutes by default): short, so
// that a test of an agent that never starts sees the cell given up in
// seconds, and long enough for any agent on a busy machine.
const AgentTimeout = 30 * time.Second

// AgentKeepalive and AgentKeepaliveTimeout are kip's cells.agentKeepalive
// and agentKeepaliveTimeout in the e2e runs (30 s and 15 s by default):
// the most often the agents allow, so that a silent cell is noticed
// within 15 s (TestSilentCellIsNoticed), not 45.
const (
	AgentKeepalive        = 10 * time.Second
	AgentKeepaliveTimeout = 5 * time.Second
)

// BootRetry is kip's cells.bootRetry in the e2e runs (30 s by default):
// the wait before a cell whose agent never answered is launched again.
const BootRetry = 5 * time.Second

// indent puts prefix before every line of text, which it ends with a
// newline.
func indent(text, prefix string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}
