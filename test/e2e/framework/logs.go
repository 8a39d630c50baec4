package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LogTail returns the last n lines of kip's log.
func (k *Kip) LogTail(n int) string {
	data, _ := os.ReadFile(k.LogPath)
	return tail(string(data), n)
}

// LightCellsLogTail returns the last n lines of the log of the
// kip-light-cells process hosting k's light cells (KipOptions.LightCells).
func (k *Kip) LightCellsLogTail(n int) string {
	data, _ := os.ReadFile(k.LightCellsLog)
	return tail(string(data), n)
}

// AgentLogTails returns the last n lines of the agent log of every cell
// still in the local plugin's state directory (each cell's directory
// holds one: <StateDir>/cells/<cell ID>/agent.log), each headed by its
// path: what a cell's agent said when a pod did not start.
func (k *Kip) AgentLogTails(n int) string {
	var b strings.Builder
	k.eachAgentLog(func(path string, data []byte) {
		fmt.Fprintf(&b, "--- last lines of %s\n%s\n", path, tail(string(data), n))
	})
	return b.String()
}

// eachAgentLog calls fn with the path and content of the agent log of
// every cell still in the local plugin's state directory.
func (k *Kip) eachAgentLog(fn func(path string, data []byte)) {
	logs, _ := filepath.Glob(filepath.Join(k.StateDir, "cells", "*", "agent.log"))
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the cell ended meanwhile
		}
		fn(path, data)
	}
}

// keepLogs copies kip's and the simulator's logs into the directory
// KIP_E2E_KEEP_LOGS names, if set, before Stop removes kip's directory: a
// run's full logs for reading afterwards (the failure dumps show tails).
// They are named after the node (kip.kip.log, kip.gcesim.log;
// kip-swap.kip.log for a test's second kip), so that the kips of a run
// do not overwrite each other's.
func (k *Kip) keepLogs() {
	dst, ok := keepLogsDir()
	if !ok {
		return
	}
	for _, name := range []string{"kip.log", "ec2sim.log", "gcesim.log", "azuresim.log", "light-cells.log"} {
		data, err := os.ReadFile(filepath.Join(k.Dir, name))
		if err != nil {
			continue // no simulator on the local plugin
		}
		prefix := k.NodeName
		if k.beside != nil {
			prefix += "." + k.Identity
		}
		if err := os.WriteFile(filepath.Join(dst, prefix+"."+name), data, 0o644); err != nil { //nolint:gosec // as above
			fmt.Fprintln(os.Stderr, "e2e: keeping logs:", err)
		}
	}
}

// keepLogsDir is the directory KIP_E2E_KEEP_LOGS names, made if needed;
// false when it is unset or cannot be made (said on stderr).
func keepLogsDir() (string, bool) {
	dst := os.Getenv("KIP_E2E_KEEP_LOGS")
	if dst == "" {
		return "", false
	}
	if err := os.MkdirAll(dst, 0o755); err != nil { //nolint:gosec // the person running the tests names the directory
		fmt.Fprintln(os.Stderr, "e2e: keeping logs:", err)
		return "", false
	}
	return dst, true
}

// KeepAgentLogs copies the agent log of every cell still in the local
// plugin's state directory (AgentLogTails) into the directory
// KIP_E2E_KEEP_LOGS names, if set, as <node>.agent.<cell>.log: a test
// calls it while its pods' cells still run, since Stop comes after they
// ended.
func (k *Kip) KeepAgentLogs() {
	dst, ok := keepLogsDir()
	if !ok {
		return
	}
	k.eachAgentLog(func(path string, data []byte) {
		name := k.NodeName + ".agent." + filepath.Base(filepath.Dir(path)) + ".log"
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil { //nolint:gosec // as above
			fmt.Fprintln(os.Stderr, "e2e: keeping agent logs:", err)
		}
	})
}
