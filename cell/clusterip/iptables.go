package clusterip

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Commands IPTables runs, from PATH.
const (
	iptablesSave    = "iptables-save"
	iptablesRestore = "iptables-restore"
)

// IPTables programs services into a network namespace with
// iptables-restore (see the package comment). It is not safe for
// concurrent use; a Proxy calls it under its lock.
type IPTables struct {
	netns string
	log   *slog.Logger
	// run runs a command with stdin in the namespace; tests replace it.
	run func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)

	// written is what the last successful sync left; nil means unknown
	// (before the first sync, after a failure), to be read again.
	written ruleset
}

// NewIPTables returns a Programmer for the network namespace at
// netnsPath: the commands run in it through nsenter, or directly when
// netnsPath is empty (the agent's own namespace). It checks that
// iptables-save and iptables-restore are on PATH.
func NewIPTables(netnsPath string, log *slog.Logger) (*IPTables, error) {
	for _, name := range []string{iptablesSave, iptablesRestore} {
		if _, err := exec.LookPath(name); err != nil {
			return nil, fmt.Errorf("programming services with iptables: %w", err)
		}
	}
	if netnsPath != "" {
		if _, err := exec.LookPath("nsenter"); err != nil {
			return nil, fmt.Errorf("programming services in network namespace %s: %w", netnsPath, err)
		}
	}
	return newIPTables(netnsPath, log), nil
}

// In returns an IPTables that programs the network namespace at
// netnsPath with t's commands, nothing written there yet. It checks none
// of them again: t must have been made for a namespace too (NewIPTables
// with a path found nsenter).
func (t *IPTables) In(netnsPath string) *IPTables {
	return newIPTables(netnsPath, t.log)
}

// newIPTables is NewIPTables without the checks.
func newIPTables(netnsPath string, log *slog.Logger) *IPTables {
	prefix := []string(nil)
	if netnsPath != "" {
		prefix = []string{"nsenter", "--net=" + netnsPath, "--"}
	}
	t := &IPTables{netns: netnsPath, log: log}
	t.run = func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
		argv := append(append(append([]string(nil), prefix...), name), args...)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // fixed commands; the arguments are ours
		cmd.Stdin = bytes.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("running %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
		}
		return stdout.Bytes(), nil
	}
	return t
}

// Program implements Programmer: one iptables-restore that rewrites what
// changed since the last sync (everything, after reading the namespace's
// chains, on the first sync and after a failure).
func (t *IPTables) Program(ctx context.Context, services []Service) error {
	want := render(services)
	have, unknown := t.written, false
	hooked := map[string]bool{tableNat: true, tableFilter: true}
	if have == nil {
		saved, err := t.run(ctx, nil, iptablesSave)
		if err != nil {
			return err
		}
		have, hooked = parseSaved(saved)
		unknown = true
	}
	input := restoreInput(have, want, unknown, hooked)
	if len(input) == 0 {
		t.written = want
		return nil
	}
	start := time.Now()
	if _, err := t.run(ctx, input, iptablesRestore, "--noflush", "-w", "5"); err != nil {
		t.written = nil
		return withFailedLine(err, input)
	}
	t.written = want
	t.log.DebugContext(ctx, "programmed services", "services", len(services), "full", unknown,
		"bytes", len(input), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

var failedLineRE = regexp.MustCompile(`line (\d+) failed`)

// withFailedLine adds to an iptables-restore error the input line it
// names.
func withFailedLine(err error, input []byte) error {
	m := failedLineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(input), "\n")
	if n < 1 || n > len(lines) {
		return err
	}
	return fmt.Errorf("%w (line %d: %s)", err, n, lines[n-1])
}
