package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// record is what the plugin knows about one cell, kept in
// <stateDir>/cells/<cellID>/instance.json. It is the only truth: the plugin
// holds nothing about cells in memory, so any plugin process pointed at the
// same state directory (a restart, an upgrade, a second replica) sees the
// same cells. Launch writes it before it creates anything, so a crash in
// the middle of a launch leaves a record that Terminate can clean up from.
type record struct {
	ID           string                 `json:"id"`
	CellID       string                 `json:"cellID"`
	InstanceType string                 `json:"instanceType"`
	CapacityType pluginapi.CapacityType `json:"capacityType"`
	Zone         string                 `json:"zone"`
	Tags         map[string]string      `json:"tags"`

	Network string `json:"network"`          // netns or loopback
	Netns   string `json:"netns,omitempty"`  // network namespace name (netns mode)
	Veth    string `json:"veth,omitempty"`   // host end of the veth pair (netns mode)
	Bridge  string `json:"bridge,omitempty"` // bridge the veth joins (netns mode)
	Address string `json:"address"`          // the cell's IPv4 address
	// PodAddress is the pod's own address (pluginapi.AddressPod), a second
	// one of the subnet, which the cell's agent gives the pod's network
	// namespace (netns mode; empty in loopback mode, where pods share this
	// machine's network).
	PodAddress string `json:"podAddress,omitempty"`
	Gateway    string `json:"gateway,omitempty"` // the bridge's address (netns mode)
	Prefix     int    `json:"prefix,omitempty"`  // subnet prefix length (netns mode)

	MilliCPU    int64 `json:"milliCPU"`
	MemoryBytes int64 `json:"memoryBytes"`
	// Cgroups are the cgroup directories Launch created, removed by
	// Terminate; empty when limits could not be enforced.
	Cgroups []string `json:"cgroups,omitempty"`
	// CgroupPath is the cell's cgroup from the root of the hierarchy
	// (/kip/<cellID>), which holds the agent's group and the pod's, where
	// the agent makes its containers' cgroups (kip-cell's --cgroup-parent
	// is <CgroupPath>/pod), so that the cell's limits bound its pod;
	// empty without Cgroups.
	CgroupPath string `json:"cgroupPath,omitempty"`
	// LimitsNotEnforced says why, when the cgroups could not be written.
	LimitsNotEnforced string `json:"limitsNotEnforced,omitempty"`

	// PID is the agent's process ID, zero until the agent has started.
	// StartTime is field 22 of /proc/<pid>/stat at launch (clock ticks
	// since boot): a PID is the same process only if its start time is too,
	// which guards against the PID being reused after the agent exited.
	PID        int       `json:"pid,omitempty"`
	StartTime  uint64    `json:"startTime,omitempty"`
	LaunchedAt time.Time `json:"launchedAt"`

	// Supervision (supervise.go): when the agent process last started,
	// how often it was restarted, how many times in a row it exited
	// within stableAfter of its start, and whether the cell was given up
	// for it (then it counts as terminated).
	AgentStartedAt time.Time `json:"agentStartedAt,omitzero"`
	Restarts       int       `json:"restarts,omitempty"`
	QuickExits     int       `json:"quickExits,omitempty"`
	GaveUp         bool      `json:"gaveUp,omitempty"`
}

// File names inside a cell directory.
const (
	recordFile    = "instance.json"
	bootstrapFile = "bootstrap"
	agentLogFile  = "agent.log"
)

// cellIDPattern is the contract's cell ID: at most 63 of [a-z0-9-]. The
// plugin also uses it as a directory name, so it must not be anything else.
var cellIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// instanceID derives the instance ID from the cluster and the cell, so a
// retried Launch computes the same ID without looking anything up, and two
// clusters sharing a machine never collide.
func instanceID(clusterID, cellID string) string {
	sum := sha256.Sum256([]byte(clusterID + "/" + cellID))
	return "local-" + hex.EncodeToString(sum[:6])
}

// shortID is the hex part of an instance ID, used for names that must be
// short (interface names have at most 15 characters).
func shortID(instanceID string) string { return instanceID[len("local-"):] }

func cellsDir(stateDir string) string { return filepath.Join(stateDir, "cells") }

func cellDir(stateDir, cellID string) string { return filepath.Join(cellsDir(stateDir), cellID) }

// readRecord reads a cell's record; fs.ErrNotExist when there is none.
func readRecord(stateDir, cellID string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(cellDir(stateDir, cellID), recordFile))
	if err != nil {
		return nil, err
	}
	r := &record{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("reading record of cell %s: %w", cellID, err)
	}
	return r, nil
}

// writeRecord writes r atomically (writeJSONAtomic) as the cell's
// instance.json.
func writeRecord(stateDir string, r *record) error {
	return writeJSONAtomic(filepath.Join(cellDir(stateDir, r.CellID), recordFile), r)
}

// writeJSONAtomic writes v as indented JSON to path atomically: a
// temporary file in the same directory, synced, then renamed over path. A
// reader (another plugin process) sees the old content or the new, never
// half of it.
func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readRecords reads every cell's record. A cell directory without a
// record (a launch that crashed before writing it) is skipped: it holds
// nothing but files, which the next Launch of that cell reuses.
func readRecords(stateDir string) ([]*record, error) {
	entries, err := os.ReadDir(cellsDir(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*record
	for _, e := range entries {
		if !e.IsDir() {
			continue // lock files
		}
		r, err := readRecord(stateDir, e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // not yet written, or removed since ReadDir
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// findRecord returns the record with instance ID id, or nil.
func findRecord(stateDir, id string) (*record, error) {
	records, err := readRecords(stateDir)
	if err != nil {
		return nil, err
	}
	for _, r := range records {
		if r.ID == id {
			return r, nil
		}
	}
	return nil, nil
}
