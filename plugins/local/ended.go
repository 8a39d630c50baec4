package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// A terminated cell leaves a tombstone, <stateDir>/ended/<cellID>.json:
// the instance as Terminate answered it. Describe and List do not show it
// (the cell is gone), but a later Launch of the cell answers it, terminated,
// and starts nothing, as the contract asks (a cell ID names one instance
// for good; EC2 answers a reused ClientToken the same way). Tombstones are
// kept endedRetention, the contract's minimum, and pruned by the next
// Terminate after that. A cell that ended by itself (its agent kept
// exiting: supervise.go) is shown by Describe and List, terminated with
// its reason, for endedVisible, as EC2 shows a terminated instance for
// about an hour: the host learns why it ended.

// endedRetention is how long a tombstone is kept; endedVisible how long
// Describe and List show a cell that ended by itself.
const (
	endedRetention = 24 * time.Hour
	endedVisible   = time.Hour
)

// selfEnded returns the instances of the cells that ended by themselves
// within endedVisible before now: their tombstones, not Terminate's.
func selfEnded(stateDir string, now time.Time) []pluginapi.Instance {
	entries, err := os.ReadDir(endedDir(stateDir))
	if err != nil {
		return nil
	}
	var out []pluginapi.Instance
	for _, e := range entries {
		cellID, isTombstone := strings.CutSuffix(e.Name(), ".json")
		if !isTombstone {
			continue
		}
		t, err := readEnded(stateDir, cellID)
		if err != nil || t.Instance.StateReason == reasonTerminated || now.Sub(t.EndedAt) > endedVisible {
			continue
		}
		out = append(out, t.Instance)
	}
	return out
}

// tombstone is what the plugin remembers of a terminated cell.
type tombstone struct {
	Instance pluginapi.Instance `json:"instance"`
	EndedAt  time.Time          `json:"endedAt"`
}

func endedDir(stateDir string) string { return filepath.Join(stateDir, "ended") }

func endedPath(stateDir, cellID string) string {
	return filepath.Join(endedDir(stateDir), cellID+".json")
}

// readEnded returns the tombstone of a cell; fs.ErrNotExist when there is
// none.
func readEnded(stateDir, cellID string) (*tombstone, error) {
	data, err := os.ReadFile(endedPath(stateDir, cellID))
	if err != nil {
		return nil, err
	}
	t := &tombstone{}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("reading the tombstone of cell %s: %w", cellID, err)
	}
	return t, nil
}

// writeEnded writes a cell's tombstone atomically (a temporary file renamed
// over it), so a reader sees all of it or none. The caller holds the
// cell's lock.
func writeEnded(stateDir string, t *tombstone) error {
	if err := os.MkdirAll(endedDir(stateDir), 0o700); err != nil {
		return err
	}
	return writeJSONAtomic(endedPath(stateDir, t.Instance.CellID), t)
}

// pruneEnded removes the tombstones that ended more than endedRetention
// before now, and temporary files a crash left. Failures only leave files
// for the next prune.
func pruneEnded(stateDir string, now time.Time) {
	entries, err := os.ReadDir(endedDir(stateDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(endedDir(stateDir), e.Name())
		cellID, isTombstone := strings.CutSuffix(e.Name(), ".json")
		if !isTombstone {
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > time.Hour {
				_ = os.Remove(path)
			}
			continue
		}
		t, err := readEnded(stateDir, cellID)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil || now.Sub(t.EndedAt) > endedRetention {
			_ = os.Remove(path)
		}
	}
}
